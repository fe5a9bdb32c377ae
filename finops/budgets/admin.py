from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms import ModelForm
from django.http import HttpRequest

from finops.audit.admin import AuditedAdminMixin
from finops.budgets.models import Budget, BudgetAlert, BudgetEvaluation, BudgetOptOut
from finops.budgets.services import budget_evaluations_restate
from finops.budgets.validation import budget_validate

# The service's keys that are named otherwise on the model.
_MODEL_FIELD = {"tag": "tag_key", "provider": "provider_name"}


class BudgetAdminForm(forms.ModelForm):  # type: ignore[type-arg]
    """The admin saves only what the pages and the API may save: the budgets service's rules
    (names without control characters, bounded thresholds, allowed recipients, ...)."""

    request_user: Any = None

    class Meta:
        model = Budget
        fields = [
            "name", "team", "tag_key", "tag_value", "provider_name", "period", "amount",
            "currency", "thresholds", "forecast_thresholds", "recipients", "owner", "active",
        ]  # fmt: skip

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if self.errors:
            return cleaned
        team = cleaned.get("team")
        tag_key = cleaned.get("tag_key") or ""
        data = {
            "name": cleaned.get("name", ""),
            "team": team.slug if team is not None else None,
            "tag": f"{tag_key}={cleaned.get('tag_value', '')}" if tag_key else "",
            "provider": cleaned.get("provider_name", ""),
            **{
                key: cleaned.get(key)
                for key in ("period", "amount", "currency", "thresholds", "forecast_thresholds",
                            "recipients", "active")
            },
        }  # fmt: skip
        try:
            values = budget_validate(user=self.request_user, data=data)
        except ValidationError as exc:
            for key, messages in exc.message_dict.items():
                name = _MODEL_FIELD.get(key, key)
                for message in messages:
                    self.add_error(name if name in self.fields else None, message)
            return cleaned
        cleaned.update(values)
        return cleaned


@admin.register(Budget)
class BudgetAdmin(AuditedAdminMixin, admin.ModelAdmin):
    form = BudgetAdminForm
    list_display = ("name", "team", "provider_name", "period", "amount", "currency", "active")
    list_filter = ("period", "active", "team")
    search_fields = ("name",)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form: Any = super().get_form(request, obj, change=change, **kwargs)
        form.request_user = request.user  # whose teams and role the service checks
        return form

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
