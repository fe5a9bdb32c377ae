from django.contrib import admin
from django.forms import ModelForm
from django.http import HttpRequest

from finops.audit.admin import AuditedAdminMixin
from finops.budgets.models import Budget, BudgetAlert, BudgetEvaluation, BudgetOptOut
from finops.budgets.services import budget_evaluations_restate


@admin.register(Budget)
class BudgetAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = ("name", "team", "provider_name", "period", "amount", "currency", "active")
    list_filter = ("period", "active", "team")
    search_fields = ("name",)

    def save_model(self, request: HttpRequest, obj: Budget, form: ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # The pages read stored evaluations: keep their status in step with the new amount.
        budget_evaluations_restate(budget=obj)


@admin.register(BudgetAlert)
class BudgetAlertAdmin(admin.ModelAdmin):
    list_display = ("budget", "period_start", "kind", "threshold", "as_of", "created_at")
    list_filter = ("kind",)
    readonly_fields = [f.name for f in BudgetAlert._meta.fields]


@admin.register(BudgetOptOut)
class BudgetOptOutAdmin(admin.ModelAdmin):
    list_display = ("budget", "user", "created_at")


@admin.register(BudgetEvaluation)
class BudgetEvaluationAdmin(admin.ModelAdmin):
    list_display = ("budget", "period_start", "as_of", "status", "actual", "forecast", "currency")
    list_filter = ("status", "period")
    readonly_fields = [f.name for f in BudgetEvaluation._meta.fields]
