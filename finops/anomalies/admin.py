from django.contrib import admin

from finops.anomalies.models import Anomaly, AnomalyDriver, AnomalyStatusChange


class AnomalyDriverInline(admin.TabularInline):
    model = AnomalyDriver
    extra = 0
    readonly_fields = ["position", "dimension", "key", "actual", "expected", "delta"]
    can_delete = False


class AnomalyStatusChangeInline(admin.TabularInline):
    model = AnomalyStatusChange
    extra = 0
    readonly_fields = ["from_status", "to_status", "comment", "user", "created_at"]
    can_delete = False


@admin.register(Anomaly)
class AnomalyAdmin(admin.ModelAdmin):
    list_display = ["id", "team", "series_kind", "series_key", "kind", "first_day", "last_day",
                    "impact", "currency", "severity", "status"]  # fmt: skip
    list_filter = ["status", "kind", "severity", "series_kind", "team"]
    search_fields = ["series_key", "team__slug"]
    # Figures come from the detector, status through the workflow (pages, API): read only here.
    readonly_fields = [f.name for f in Anomaly._meta.fields]
    inlines = [AnomalyDriverInline, AnomalyStatusChangeInline]
