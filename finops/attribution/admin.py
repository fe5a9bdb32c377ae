"""Read-mostly admin for the ledger and rollups: attribution writes them, people inspect them."""

from django.contrib import admin

from finops.attribution.models import AllocatedCost, AttributionRun, RunCost, TeamDailyCost


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
