"""The one FilterSet for run costs, shared by the REST API and the team page (NetBox style)."""

from __future__ import annotations

from datetime import date, datetime

import django_filters
from django import forms

from finops.attribution.models import RunCost

MONTH_FORMAT = "%Y-%m"
# Months outside these years are refused: year 0 does not exist, and readers step to the next
# month (date + 32 days), which overflows in December 9999.
MIN_YEAR, MAX_YEAR = 1970, 9998


def month_parse(text: str) -> date:
    """'YYYY-MM' -> the first day of that month. ValueError on anything else, and on years
    outside MIN_YEAR..MAX_YEAR."""
    month = datetime.strptime(text.strip(), MONTH_FORMAT).date().replace(day=1)
    if not MIN_YEAR <= month.year <= MAX_YEAR:
        raise ValueError(f"month must be between {MIN_YEAR}-01 and {MAX_YEAR}-12")
    return month


def month_format(month: date) -> str:
    return month.strftime(MONTH_FORMAT)


class MonthField(forms.DateField):
    """A form field for 'YYYY-MM' that cleans to the first day of the month."""

    input_formats = [MONTH_FORMAT]
    default_error_messages = {"invalid": "Enter a month as YYYY-MM."}

    def to_python(self, value: str | datetime | date | None) -> date | None:
        month = super().to_python(value)
        if month is not None and not MIN_YEAR <= month.year <= MAX_YEAR:
            raise forms.ValidationError(f"Enter a month from {MIN_YEAR}-01 to {MAX_YEAR}-12.")
        return month


class MonthFilter(django_filters.DateFilter):
    field_class = MonthField


class RunCostFilterSet(django_filters.FilterSet):
    month = MonthFilter(field_name="billing_period", label="Month (YYYY-MM)")
    team = django_filters.CharFilter(field_name="team__slug", label="Team slug")
    cluster = django_filters.CharFilter(field_name="cluster")
    currency = django_filters.CharFilter(field_name="billing_currency")

    class Meta:
        model = RunCost
        fields = ["month", "team", "cluster", "currency"]
