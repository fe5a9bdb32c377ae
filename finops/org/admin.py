from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Case, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from finops.audit.admin import AuditedAdminMixin
from finops.org.models import MappingRule, Profile, Team
from finops.org.selectors import mapping_rule_preview


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "role"]
    list_filter = ["role"]
    search_fields = ["user__username", "user__email"]
    filter_horizontal = ["teams"]
    list_select_related = ["user"]


@admin.register(MappingRule)
class MappingRuleAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """Rules are edited here. The change form has a "Preview" button that posts the unsaved
    form to preview_view (a dry run: org.selectors.mapping_rule_preview, which writes nothing),
    and the delete confirmation shows what deleting the rule would move."""

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
