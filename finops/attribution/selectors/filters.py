"""The one FilterSet for run costs, shared by the runs browser, the team page and the REST API
(NetBox style): the same query string gives the same rows on the page, the API and its CSV."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

import django_filters
from django import forms
from django.db.models import Case, F, FloatField, Q, QuerySet, Value, When
from django.db.models.functions import Cast
from drf_spectacular.utils import extend_schema_field

from finops.attribution.models import Category, RunCost
from finops.core.months import MAX_YEAR, MIN_YEAR, MONTH_FORMAT, MONTH_PATTERN


class MonthField(forms.DateField):
    """A form field for 'YYYY-MM' that cleans to the first day of the month."""

    input_formats = [MONTH_FORMAT]
    default_error_messages = {"invalid": "Enter a month as YYYY-MM."}

    def to_python(self, value: str | datetime | date | None) -> date | None:
        # YYYY-MM in ASCII digits, as the API's schema says (strptime takes "2025-9" too).
        if isinstance(value, str) and value and re.fullmatch(MONTH_PATTERN, value) is None:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        month = super().to_python(value)
        if month is not None and not MIN_YEAR <= month.year <= MAX_YEAR:
            raise forms.ValidationError(f"Enter a month from {MIN_YEAR}-01 to {MAX_YEAR}-12.")
        return month


# In the OpenAPI schema a YYYY-MM string, not the date its DateFilter base would claim.
@extend_schema_field({"type": "string", "pattern": MONTH_PATTERN, "example": "2025-09"})
class MonthFilter(django_filters.DateFilter):
    field_class = MonthField


class RunState:
    RUNNING = "running"
    FAILED = "failed"
    COMPLETED = "completed"
    CHOICES = [
        (RUNNING, "Running"),
        (FAILED, "Had failed or preempted attempts"),
        (COMPLETED, "Completed, no failed attempt"),
    ]


# ?ordering= names (a leading "-" for descending) -> the annotations run_costs_sortable adds.
ORDERING_FIELDS = {
    "cost": "sort_cost",
    "gpu_hours": "sort_gpu_seconds",
    "cost_per_gpu_hour": "sort_cost_per_gpu_hour",
    "wasted_cost": "sort_wasted",
    "start": "first_start",
}


def run_costs_sortable(queryset: QuerySet[RunCost]) -> QuerySet[RunCost]:
    """Numeric sort keys. Display and API figures stay the exact Decimal columns: these floats
    only order rows (on SQLite money is stored as text, where "9" sorts above "10")."""
    cost = Cast("cost", output_field=FloatField())
    seconds = Cast("gpu_seconds", output_field=FloatField())
    return queryset.annotate(
        sort_cost=cost,
        sort_gpu_seconds=seconds,
        sort_wasted=Cast("wasted_cost", output_field=FloatField()),
        sort_cost_per_gpu_hour=Case(
            When(gpu_seconds=0, then=Value(None, output_field=FloatField())),
            default=cost * Value(3600.0) / seconds,
            output_field=FloatField(),
        ),
    )


class RunOrderingFilter(django_filters.OrderingFilter):
    """Sorts by one of its sort keys (default ORDERING_FIELDS: name -> annotation); ties by
    cost, then run id, so pages never overlap."""

    def __init__(self, *args: Any, sort_keys: dict[str, str] | None = None, **kwargs: Any) -> None:
        self.sort_keys = sort_keys or ORDERING_FIELDS
        super().__init__(*args, **kwargs)

    def filter(self, qs: QuerySet[RunCost], value: Any) -> QuerySet[RunCost]:
        orderings = [v for v in (value or []) if v.lstrip("-") in self.sort_keys]
        if not orderings:
            return qs
        keys = []
        for name in orderings:
            field = F(self.sort_keys[name.lstrip("-")])
            desc = name.startswith("-")
            keys.append(field.desc(nulls_last=True) if desc else field.asc(nulls_last=True))
        return qs.order_by(*keys, F("sort_cost").desc(), "run_id", "id")


class RunCostFilterSet(django_filters.FilterSet):
    month = MonthFilter(field_name="billing_period", label="Month (YYYY-MM)")
    team = django_filters.CharFilter(field_name="team__slug", label="Team slug")
    cluster = django_filters.CharFilter(field_name="cluster")
    currency = django_filters.CharFilter(field_name="billing_currency")
    state = django_filters.ChoiceFilter(choices=RunState.CHOICES, method="filter_state")
    q = django_filters.CharFilter(method="filter_search", label="Run id contains")
    # Training runs unless asked: pods that serve an endpoint are the endpoints' cost.
    category = django_filters.ChoiceFilter(
        choices=[(Category.TRAINING.value, "Training"), (Category.INFERENCE.value, "Inference")],
        empty_label="Training",
        method="filter_category",
    )
    ordering = RunOrderingFilter(
        fields=[(name, name) for name in ORDERING_FIELDS],
        label="Sort by (cost, gpu_hours, cost_per_gpu_hour, wasted_cost, start; - descending)",
    )

    class Meta:
        model = RunCost
        fields = ["month", "team", "cluster", "currency", "state", "q", "category", "ordering"]

    @property
    def qs(self) -> QuerySet[RunCost]:
        queryset: QuerySet[RunCost] = super().qs
        # The category filter has a default (training), applied even when the field is absent.
        if not (self.form.is_bound and self.form.is_valid() and self.form.cleaned_data["category"]):
            queryset = queryset.filter(category=Category.TRAINING)
        return queryset

    def filter_queryset(self, queryset: QuerySet[RunCost]) -> QuerySet[RunCost]:
        return super().filter_queryset(run_costs_sortable(queryset))

    def filter_state(self, queryset: QuerySet[RunCost], name: str, value: str) -> QuerySet[RunCost]:
        if value == RunState.RUNNING:
            return queryset.filter(running_jobs__gt=0)
        if value == RunState.FAILED:
            return queryset.filter(failed_jobs__gt=0)
        return queryset.filter(running_jobs=0, failed_jobs=0)

    def filter_search(
        self, queryset: QuerySet[RunCost], name: str, value: str
    ) -> QuerySet[RunCost]:
        text = value.strip()
        return queryset.filter(Q(run_id__icontains=text)) if text else queryset

    def filter_category(
        self, queryset: QuerySet[RunCost], name: str, value: str
    ) -> QuerySet[RunCost]:
        return queryset.filter(category=value)
