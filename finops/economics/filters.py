"""The runs' FilterSet with the stored run economics' sort keys: RunCostFilterSet (the runs
browser's, the team page's and the API's one FilterSet) plus `?ordering=` waste,
cost_per_million_tokens, mfu and kwh, read from RunEconomics (finops.economics.models: one row
per RunCost row, matched on its natural key; a run without a row sorts last either way)."""

from __future__ import annotations

from typing import Any

from django.db.models import Case, FloatField, OuterRef, QuerySet, Subquery, When
from django.db.models.functions import Cast

from finops.attribution.models import RunCost
from finops.attribution.selectors.filters import (
    ORDERING_FIELDS,
    RunCostFilterSet,
    RunOrderingFilter,
)
from finops.economics.models import RunEconomics

# ?ordering= names -> (annotation, RunEconomics column).
STORED_SORTS = {
    "waste": ("sort_waste", "waste_total"),
    "cost_per_million_tokens": ("sort_cost_per_million_tokens", "cost_per_million_tokens"),
    "mfu": ("sort_mfu", "mfu"),
    "kwh": ("sort_kwh", "gpu_kwh"),
}
RUN_ORDERING_FIELDS = {**ORDERING_FIELDS, **{name: a for name, (a, _) in STORED_SORTS.items()}}


def _stored(column: str) -> Case:
    """The column of the RunCost row's RunEconomics row, as a float (money is text on SQLite).
    Runs no team owns match on a null team (SQL's = never matches null)."""
    same = RunEconomics.objects.filter(
        billing_period=OuterRef("billing_period"),
        run_id=OuterRef("run_id"),
        cluster=OuterRef("cluster"),
        currency=OuterRef("billing_currency"),
    )
    owned = same.filter(team_id=OuterRef("team_id")).values(column)[:1]
    unowned = same.filter(team__isnull=True).values(column)[:1]
    return Case(
        When(team__isnull=True, then=Cast(Subquery(unowned), output_field=FloatField())),
        default=Cast(Subquery(owned), output_field=FloatField()),
        output_field=FloatField(),
    )


class RunFilterSet(RunCostFilterSet):
    ordering = RunOrderingFilter(
        fields=[(name, name) for name in RUN_ORDERING_FIELDS],
        sort_keys=RUN_ORDERING_FIELDS,
        label=(
            "Sort by (cost, gpu_hours, cost_per_gpu_hour, waste, cost_per_million_tokens, mfu, "
            "kwh, start; wasted_cost is deprecated: failed attempts' whole cost; - descending)"
        ),
    )

    class Meta(RunCostFilterSet.Meta):
        pass

    def filter_queryset(self, queryset: QuerySet[RunCost]) -> QuerySet[RunCost]:
        # Only the stored sort key asked for is joined (each is a subquery per listed run).
        asked: Any = self.form.cleaned_data.get("ordering") or []
        wanted = {name.lstrip("-") for name in asked}
        extra = {a: _stored(column) for n, (a, column) in STORED_SORTS.items() if n in wanted}
        return super().filter_queryset(queryset.annotate(**extra) if extra else queryset)
