from django.contrib import admin

from finops.audit.admin import AuditedAdminMixin
from finops.budgets.models import Budget, BudgetAlert, BudgetOptOut


@admin.register(Budget)
class BudgetAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = ("name", "team", "provider_name", "period", "amount", "currency", "active")
    list_filter = ("period", "active", "team")
    search_fields = ("name",)


@admin.register(BudgetAlert)
class BudgetAlertAdmin(admin.ModelAdmin):
    list_display = ("budget", "period_start", "kind", "threshold", "as_of", "created_at")
    list_filter = ("kind",)
    readonly_fields = [f.name for f in BudgetAlert._meta.fields]


@admin.register(BudgetOptOut)
class BudgetOptOutAdmin(admin.ModelAdmin):
    list_display = ("budget", "user", "created_at")
