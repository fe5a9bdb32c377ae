"""The create / edit form. It renders the fields; the budgets service validates (the same
rules as the API), and its errors are put back on the fields."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.forms.utils import ErrorDict

from finops.budgets.models import Budget
from finops.budgets.validation import NAME_MAX, PROVIDER_MAX, TAG_KEY_MAX, TAG_VALUE_MAX
from finops.org.models import Team
from finops.text import SingleLineCharField

FIELDS = (
    "name", "team", "tag", "provider", "period", "amount", "currency", "thresholds",
    "forecast_thresholds", "recipients", "active",
)  # fmt: skip


class BudgetForm(forms.Form):
    # Lengths as the service checks them (the inputs' maxlength); it is what rejects.
    name = SingleLineCharField(max_length=NAME_MAX, required=False)
    team = forms.ChoiceField(required=False)
    tag = SingleLineCharField(
        max_length=TAG_KEY_MAX + 1 + TAG_VALUE_MAX,
        required=False,
        help_text="optional: key=value on line items",
    )
    provider = SingleLineCharField(
        max_length=PROVIDER_MAX, required=False, help_text="finance: one provider's cost"
    )
    period = forms.ChoiceField(choices=Budget.Period.choices)
    amount = forms.CharField(required=False)
    currency = forms.CharField(max_length=3, required=False)
    thresholds = forms.CharField(required=False, help_text="% of the amount on actual cost")
    forecast_thresholds = forms.CharField(required=False, help_text="% on the forecast")
    recipients = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="beside the team's leads with an email address: an organisation or provider "
        "budget, or a team whose leads have none, emails nobody without addresses here",
    )
    active = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: Any, teams: list[Team], finance: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(t.slug, t.name) for t in teams]
        if finance:
            choices.insert(0, ("", "Whole organisation / a provider"))
        self.fields["team"].choices = choices  # type: ignore[attr-defined]

    @staticmethod
    def initial_for(budget: Budget) -> dict[str, Any]:
        return {
            "name": budget.name,
            "team": budget.team.slug if budget.team else "",
            "tag": budget.tag or "",
            "provider": budget.provider_name,
            "period": budget.period,
            "amount": f"{budget.amount:.2f}",
            "currency": budget.currency,
            "thresholds": ", ".join(str(t) for t in budget.thresholds),
            "forecast_thresholds": ", ".join(str(t) for t in budget.forecast_thresholds),
            "recipients": ", ".join(budget.recipients),
            "active": budget.active,
        }

    def service_data(self) -> dict[str, Any]:
        """The submitted values as the service takes them (raw: the service validates)."""
        data = {key: self.data.get(key, "") for key in FIELDS if key != "active"}
        data["team"] = data["team"] or None
        data["active"] = self.data.get("active") in ("on", "true", "1", "True")
        return data

    def add_service_errors(self, error: ValidationError) -> None:
        """Show the service's errors, in place of the fields' own (the same rules, said once)."""
        self.is_valid()
        self._errors = ErrorDict()
        for key, messages in error.message_dict.items():
            for message in messages:
                self.add_error(key if key in self.fields else None, message)
