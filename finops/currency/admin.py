"""FX rates in the admin: loaded by `load_fx_rates`, corrected here by hand when needed."""

from django.contrib import admin

from finops.audit.admin import AuditedAdminMixin
from finops.currency.models import FxRate


@admin.register(FxRate)
class FxRateAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["date", "from_currency", "to_currency", "rate", "source", "loaded_at"]
    list_filter = ["from_currency", "to_currency", "source"]
    search_fields = ["from_currency", "to_currency", "source"]
    date_hierarchy = "date"
    ordering = ["-date", "from_currency", "to_currency"]
    readonly_fields = ["loaded_at"]
