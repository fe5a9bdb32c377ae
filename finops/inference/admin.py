"""Read-only lists of inference usage and endpoint costs: both are written by imports and the
rollup (endpoint_costs_rebuild), so an edit here would only be overwritten or break the ledger."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from finops.inference.models import EndpointCost, InferenceUsage


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(InferenceUsage)
class InferenceUsageAdmin(_ReadOnlyAdmin):
    list_display = [
        "endpoint", "cluster", "model_name", "pod", "window_start", "requests", "prompt_tokens",
        "generation_tokens", "team_hint",
    ]  # fmt: skip
    list_filter = ["cluster", "endpoint"]
    search_fields = ["endpoint", "model_name", "pod", "namespace"]
    date_hierarchy = "window_start"
    ordering = ["-window_start", "endpoint"]
    show_full_result_count = False  # usage tables grow large: skip the extra COUNT(*)


@admin.register(EndpointCost)
class EndpointCostAdmin(_ReadOnlyAdmin):
    list_display = [
        "day", "endpoint", "billing_currency", "cost", "requests", "tokens",
        "cost_per_1k_requests", "cost_per_1m_tokens", "idle_share", "pods",
    ]  # fmt: skip
    list_filter = ["billing_period", "billing_currency", "endpoint"]
    search_fields = ["endpoint"]
    date_hierarchy = "day"
