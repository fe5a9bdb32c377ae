"""Admin: the audit log (read only), and the mixin that records configuration changes."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models, transaction
from django.db.models import QuerySet
from django.forms import BaseFormSet, ModelForm
from django.http import HttpRequest

from finops.audit.models import AuditEvent
from finops.audit.services import audit_record


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "actor_name", "action", "obj_repr", "reason"]
    list_filter = ["action"]
    search_fields = ["obj_repr", "actor_name", "reason"]
    readonly_fields = [f.name for f in AuditEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _action_name(model: type[models.Model]) -> str:
    # "MappingRule" -> "mapping_rule"
    name = model.__name__
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _field_values(obj: models.Model, names: list[str]) -> dict[str, Any]:
    values = {}
    for name in names:
        value = getattr(obj, name, None)
        values[name] = str(value) if isinstance(value, models.Model) else value
    return values


class AuditedAdminMixin:
    """Records every add, change and delete made in the admin (with the fields that changed,
    old and new) in the audit log, in the same transaction as the change."""

    def save_model(self, request: HttpRequest, obj: Any, form: ModelForm, change: bool) -> None:
        changed = list(form.changed_data)
        before: dict[str, Any] = {}
        if change and obj.pk:
            # The form already wrote the new values onto obj: read the stored ones.
            stored = type(obj)._default_manager.filter(pk=obj.pk).first()
            before = _field_values(stored, changed) if stored is not None else {}
        with transaction.atomic():
            super().save_model(request, obj, form, change)  # type: ignore[misc]
            after = _field_values(obj, changed)
            audit_record(
                actor=request.user,
                action=f"{_action_name(type(obj))}.{'change' if change else 'add'}",
                obj_repr=str(obj),
                details={
                    "id": obj.pk,
                    "changes": {k: [before.get(k), after[k]] for k in changed} if change else after,
                },
            )

    def save_formset(
        self, request: HttpRequest, form: ModelForm, formset: BaseFormSet, change: bool
    ) -> None:
        super().save_formset(request, form, formset, change)  # type: ignore[misc]
        # Inline rows (e.g. a shared-cost rule's splits): one event per row added, changed
        # or deleted, after the formset saved them.
        for obj in getattr(formset, "new_objects", []):
            self._inline_event(request, obj, "add")
        for obj, fields in getattr(formset, "changed_objects", []):
            self._inline_event(request, obj, "change", fields=list(fields))
        for obj in getattr(formset, "deleted_objects", []):
            self._inline_event(request, obj, "delete")

    def _inline_event(
        self, request: HttpRequest, obj: Any, verb: str, fields: list[str] | None = None
    ) -> None:
        names = fields or [f.attname for f in obj._meta.concrete_fields if f.attname != "id"]
        audit_record(
            actor=request.user,
            action=f"{_action_name(type(obj))}.{verb}",
            obj_repr=str(obj),
            details={"id": obj.pk, "fields": _field_values(obj, names)},
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            audit_record(
                actor=request.user,
                action=f"{_action_name(type(obj))}.delete",
                obj_repr=str(obj),
                details={"id": obj.pk},
            )
            super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            for obj in queryset:
                audit_record(
                    actor=request.user,
                    action=f"{_action_name(type(obj))}.delete",
                    obj_repr=str(obj),
                    details={"id": obj.pk},
                )
            super().delete_queryset(request, queryset)  # type: ignore[misc]
