"""Read-mostly admin for the ledger and rollups: attribution writes them, people inspect them."""

from decimal import Decimal

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet

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
from finops.audit.admin import AuditedAdminMixin


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
    readonly_fields = ["started_at", "finished_at"]


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
