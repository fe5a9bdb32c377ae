"""Read-mostly admin for the ledger and rollups: attribution writes them, people inspect them.
Also the admin of org's MappingRule, whose change form previews what a change would move (a dry
run of attribution's team resolution)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Case, When
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from finops.attribution.models import (
    AllocatedCost,
    AttributionRun,
    ChargeBasis,
    IdlePolicy,
    RunCost,
    SharedCostRule,
    SharedCostSplit,
    TeamDailyCost,
)
from finops.attribution.selectors.rule_preview import mapping_rule_preview
from finops.audit.admin import AuditedAdminMixin
from finops.org.models import MappingRule


@admin.register(AllocatedCost)
class AllocatedCostAdmin(admin.ModelAdmin):
    list_display = [
        "billing_period",
        "day",
        "category",
        "team",
        "run_id",
        "node",
        "provider_name",
        "billing_account_id",
        "amount",
        "billing_currency",
    ]
    list_filter = ["billing_period", "category", "provider_name", "billing_currency"]
    search_fields = ["run_id", "node", "billing_account_id", "service_name"]
    list_select_related = ["team"]
    raw_id_fields = ["job", "source_batch", "team"]
    date_hierarchy = "day"
    show_full_result_count = False


@admin.register(RunCost)
class RunCostAdmin(admin.ModelAdmin):
    list_display = [
        "billing_period",
        "run_id",
        "team",
        "cluster",
        "cost",
        "wasted_cost",
        "jobs",
        "failed_jobs",
        "billing_currency",
    ]
    list_filter = ["billing_period", "team", "cluster", "billing_currency"]
    search_fields = ["run_id"]
    list_select_related = ["team"]


@admin.register(TeamDailyCost)
class TeamDailyCostAdmin(admin.ModelAdmin):
    list_display = ["day", "team", "category", "provider_name", "amount", "billing_currency"]
    list_filter = ["billing_period", "category", "team", "provider_name"]
    list_select_related = ["team"]
    date_hierarchy = "day"


@admin.register(AttributionRun)
class AttributionRunAdmin(admin.ModelAdmin):
    list_display = ["billing_period", "status", "line_items", "jobs", "started_at", "finished_at"]
    list_filter = ["status", "billing_period"]
    readonly_fields = ["started_at", "finished_at", "phases"]


@admin.register(IdlePolicy)
class IdlePolicyAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["priority", "cluster", "node_prefix", "policy", "owner_team"]
    list_editable = ["policy"]
    list_filter = ["policy"]
    list_select_related = ["owner_team"]
    ordering = ["priority", "id"]


@admin.register(ChargeBasis)
class ChargeBasisAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["cluster", "basis"]
    list_editable = ["basis"]
    list_filter = ["basis"]


class _SplitsFormSet(BaseInlineFormSet):  # type: ignore[type-arg]
    """A fixed rule's percentages must add up to 100 (the engine would otherwise normalise them
    silently); the other methods take no percentages."""

    def clean(self) -> None:
        super().clean()
        kept = [
            form.cleaned_data
            for form in self.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        method = getattr(self.instance, "method", None)
        if method != SharedCostRule.Method.FIXED:
            if kept:
                raise ValidationError("Only a fixed rule has percentages.")
            return
        total = sum((row.get("percent") or Decimal(0) for row in kept), Decimal(0))
        if total != 100:
            raise ValidationError(f"The percentages add up to {total}, not 100.")


class SharedCostSplitInline(admin.TabularInline):  # type: ignore[type-arg]
    model = SharedCostSplit
    formset = _SplitsFormSet
    extra = 1


@admin.register(SharedCostRule)
class SharedCostRuleAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = [
        "priority",
        "name",
        "provider_name",
        "sub_account_id",
        "service_category",
        "service_name",
        "charge_category",
        "method",
    ]
    list_filter = ["method", "charge_category", "provider_name"]
    ordering = ["priority", "id"]
    inlines = [SharedCostSplitInline]


@admin.register(MappingRule)
class MappingRuleAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """Rules are edited here. The change form has a "Preview" button that posts the unsaved
    form to preview_view (a dry run: rule_preview.mapping_rule_preview, which writes nothing),
    and the delete confirmation shows what deleting the rule would move. The templates keep
    the model's admin path (admin/org/mappingrule/)."""

    list_display = ["priority", "kind", "key", "value", "team"]
    list_filter = ["kind", "team"]
    search_fields = ["key", "value", "team__slug"]
    list_select_related = ["team"]
    # The order rules apply in (MappingRule.precedence).
    ordering = [
        "priority",
        Case(
            *(When(kind=kind, then=rank) for rank, kind in enumerate(MappingRule.KIND_ORDER)),
            default=len(MappingRule.KIND_ORDER),
        ),
        "id",
    ]
    change_form_template = "admin/org/mappingrule/change_form.html"
    delete_confirmation_template = "admin/org/mappingrule/delete_confirmation.html"

    def get_urls(self) -> list[URLPattern]:
        preview = self.admin_site.admin_view(require_POST(self.preview_view))
        return [
            path("preview/", preview, name="org_mappingrule_preview"),
            *super().get_urls(),
        ]

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """Validate the posted (unsaved) rule form and show what it would move. ?rule=<id>
        when the form edits an existing rule."""
        rule_id = request.GET.get("rule") or None
        obj = get_object_or_404(MappingRule, pk=rule_id) if rule_id else None
        allowed = (
            self.has_change_permission(request, obj) if obj else self.has_add_permission(request)
        )
        if not allowed:
            raise PermissionDenied
        form_class = self.get_form(request, obj, change=obj is not None)
        # The form fills a copy in memory (construct_instance); nothing calls save().
        form = form_class(request.POST, instance=obj)
        preview = None
        if form.is_valid():
            preview = mapping_rule_preview(
                rule_data={**form.cleaned_data, "id": obj.pk if obj else None}, month=None
            )
        save_url = (
            reverse("admin:org_mappingrule_change", args=[obj.pk])
            if obj
            else reverse("admin:org_mappingrule_add")
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Preview of a mapping-rule change",
            "form": form,
            "original": obj,
            "preview": preview,
            "save_url": save_url,
        }
        return TemplateResponse(request, "admin/org/mappingrule/preview.html", context)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method == "GET" and MappingRule.objects.filter(pk=object_id).exists():
            extra_context = {
                **(extra_context or {}),
                "preview": mapping_rule_preview(
                    rule_data={"id": object_id, "delete": True}, month=None
                ),
            }
        return super().delete_view(request, object_id, extra_context)
