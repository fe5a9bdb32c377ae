"""The one FilterSet for run costs, shared by the REST API and the team page (NetBox style)."""

from __future__ import annotations

from datetime import date, datetime

import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from finops.api.schema import MONTH_SCHEMA
from finops.attribution.models import RunCost

MONTH_FORMAT = "%Y-%m"


def month_parse(text: str) -> date:
    """'YYYY-MM' -> the first day of that month. ValueError on anything else."""
    return datetime.strptime(text.strip(), MONTH_FORMAT).date().replace(day=1)


def month_format(month: date) -> str:
    return month.strftime(MONTH_FORMAT)


class MonthField(forms.DateField):
    """A form field for 'YYYY-MM' that cleans to the first day of the month."""

    input_formats = [MONTH_FORMAT]
    default_error_messages = {"invalid": "Enter a month as YYYY-MM."}


# In the OpenAPI schema a YYYY-MM string, not the date its DateFilter base would claim.
@extend_schema_field(MONTH_SCHEMA)
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
