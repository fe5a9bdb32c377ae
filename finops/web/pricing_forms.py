"""The pricing assumptions form (issue 27): one input per figure, never raw JSON.

The committed price ratios and the interruption notices are one number input each; the
interruption bands and the family bands are "name = value" lines. Every input carries its
bounds (assumption_checks.BOUNDS) and money inputs their currency; what is refused is refused by
the model's validation (finops.pricing.services.pricing_assumptions_check), as in the API, and
the message names the setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models

from finops.pricing.assumption_checks import BOUNDS, RESERVED_TERMS, TERM_LABELS
from finops.pricing.models import PricingAssumptions, _default_notice_seconds
from finops.pricing.services import ASSUMPTION_FIELDS, pricing_assumptions_check

STRUCTURED = ("interruption_bands", "family_bands", "notice_seconds", "reserved_ratios")
# The figures of the on-prem cost, in the assumptions' currency; the suffix says per what.
MONEY_SUFFIX = {
    "node_capex": "per node",
    "price_per_kwh": "per kWh",
    "rack_per_node_month": "",
    "network_per_node_month": "",
    "staff_per_node_month": "",
}
LINES_HELP = {
    "interruption_bands": (
        "One band a line: band = share of spot instances interrupted per month (0 to 1), "
        "e.g. >20% = 0.25"
    ),
    "family_bands": (
        'One a line: instance family or "family:region" = band, e.g. p5 = 5-10%. '
        "Families not listed take the published band, else the default band."
    ),
}


def _lines(value: Any) -> str:
    if not isinstance(value, Mapping):
        return ""
    return "\n".join(f"{key} = {item}" for key, item in value.items())


def _parse_lines(text: str, label: str) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValidationError(f"{label}, line {number}: write name = value, not {line!r}.")
        parsed[key.strip()] = value.strip()
    return parsed


class PricingAssumptionsForm(forms.Form):
    def __init__(self, data: Any = None, *, instance: PricingAssumptions) -> None:
        super().__init__(data)
        self.instance = instance
        currency = instance.currency
        for field in PricingAssumptions._meta.concrete_fields:
            if field.name in ASSUMPTION_FIELDS and field.name not in STRUCTURED:
                self.fields[field.name] = self._scalar(field, currency)
        for term in RESERVED_TERMS:
            self.fields[f"reserved_{term}"] = forms.DecimalField(
                label=f"Committed price / on demand, {TERM_LABELS[term]}",
                min_value=None, max_digits=6, decimal_places=4,
                initial=(instance.reserved_ratios or {}).get(term),
                widget=forms.NumberInput(attrs={"min": 0, "max": 1, "step": "0.0001"}),
                help_text="between 0 and 1, where the catalogue has no committed price",
            )  # fmt: skip
        notices = instance.notice_seconds
        stored_notices = notices if isinstance(notices, dict) else {}
        for provider in sorted({*_default_notice_seconds(), *stored_notices}):
            self.fields[f"notice_{provider}"] = forms.IntegerField(
                label=f"Interruption notice, {provider} (seconds)",
                initial=stored_notices.get(provider),
                widget=forms.NumberInput(attrs={"min": 0, "max": 3600}),
            )
        for name in ("interruption_bands", "family_bands"):
            self.fields[name] = forms.CharField(
                label=name.replace("_", " ").capitalize(), required=name == "interruption_bands",
                initial=_lines(getattr(instance, name)), help_text=LINES_HELP[name],
                widget=forms.Textarea(attrs={"rows": 5, "cols": 40}),
            )  # fmt: skip

    def _scalar(self, field: models.Field[Any, Any], currency: str) -> forms.Field:
        form_field = field.formfield()
        assert form_field is not None
        bound = BOUNDS.get(field.name)
        label = bound.label if bound else str(field.verbose_name).capitalize()
        if field.name in MONEY_SUFFIX:
            label = f"{label} ({' '.join(filter(None, (currency, MONEY_SUFFIX[field.name])))})"
        form_field.label = label
        form_field.initial = getattr(self.instance, field.name)
        if bound is not None:
            form_field.widget.attrs.update({"min": str(bound.low), "max": str(bound.high)})
            form_field.help_text = "; ".join(
                filter(None, (str(field.help_text), f"allowed {bound.low} to {bound.high}"))
            )
        return form_field

    def values(self) -> dict[str, Any]:
        """The settings as the model stores them, from the inputs that parsed."""
        data = self.cleaned_data
        values = {name: data[name] for name in ASSUMPTION_FIELDS if name in data}
        terms = {term: data.get(f"reserved_{term}") for term in RESERVED_TERMS}
        values["reserved_ratios"] = {k: str(v) for k, v in terms.items() if v is not None}
        values["notice_seconds"] = {
            name.removeprefix("notice_"): value
            for name, value in data.items()
            if name.startswith("notice_") and value is not None
        }
        for name in ("interruption_bands", "family_bands"):
            try:
                values[name] = _parse_lines(data.get(name, ""), str(self.fields[name].label))
            except ValidationError as exc:
                self.add_error(name, exc)
                values.pop(name)
        return values

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        values = self.values()
        try:
            pricing_assumptions_check(values=values, instance=PricingAssumptions.current())
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                self.add_error(self._input_of(name), messages)
        self.checked = values
        return cleaned

    def _input_of(self, setting: str) -> str | None:
        if setting in self.fields:
            return setting
        if setting == "reserved_ratios":
            return f"reserved_{RESERVED_TERMS[0]}"
        return None  # notice_seconds: said above the form, the message names it
