"""The one FilterSet of the cost explorer, shared by its page (/explorer/) and the API
(`/api/v1/costs/`): the same query string gives the same figures on the page, in its CSV and
from the API. It validates and renders the parameters; finops.attribution.selectors.explorer applies
them to the ledger or the bill, whichever answers the question."""

from __future__ import annotations

from typing import Any

import django_filters
from django.core.validators import RegexValidator

from finops.attribution.models import Category, TeamDailyCost
from finops.attribution.selectors.explorer import (
    AMORTISED,
    GROUP_BY_PATTERN,
    INVOICED,
    TAG_FILTER_PATTERN,
    ExplorerQuery,
    tag_filter_parse,
)
from finops.attribution.selectors.timeseries import INTERVALS

SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"
# The dimension filters, in the order the page shows them: (parameter, label).
DIMENSION_FILTERS = [
    ("provider", "Provider"),
    ("account", "Billing account"),
    ("service", "Service"),
    ("region", "Region"),
    ("instance_type", "Instance type"),
    ("category", "Category"),
    ("team", "Team (slug)"),
]
COST_CHOICES = [
    (AMORTISED, "Amortised (EffectiveCost)"),
    (INVOICED, "Invoiced (BilledCost)"),
]


def _noop(queryset: Any, name: str, value: Any) -> Any:
    return queryset


class CostExplorerFilterSet(django_filters.FilterSet):
    group_by = django_filters.CharFilter(
        method=_noop,
        label="Group by",
        validators=[
            RegexValidator(
                GROUP_BY_PATTERN,
                "team, provider, category, service, region, instance_type, account or tag:KEY.",
            )
        ],
    )
    cost = django_filters.ChoiceFilter(
        method=_noop, choices=COST_CHOICES, empty_label="Amortised (EffectiveCost)", label="Cost"
    )
    interval = django_filters.ChoiceFilter(
        method=_noop,
        choices=[(i, i.title() + "ly" if i != "day" else "Daily") for i in INTERVALS],
        empty_label="Daily",
        label="Interval",
    )
    provider = django_filters.CharFilter(method=_noop, label="Provider")
    account = django_filters.CharFilter(method=_noop, label="Billing account")
    service = django_filters.CharFilter(method=_noop, label="Service")
    region = django_filters.CharFilter(method=_noop, label="Region")
    instance_type = django_filters.CharFilter(method=_noop, label="Instance type")
    category = django_filters.ChoiceFilter(
        method=_noop, choices=Category.choices, empty_label="Any", label="Category"
    )
    team = django_filters.CharFilter(
        method=_noop,
        label="Team (slug)",
        validators=[RegexValidator(SLUG_PATTERN, "A team slug: letters, digits, - and _.")],
    )
    tag = django_filters.CharFilter(
        method=_noop,
        label="Tag (KEY=VALUE)",
        validators=[RegexValidator(TAG_FILTER_PATTERN, "KEY=VALUE, e.g. project=llm.")],
    )

    class Meta:
        # The filters are declared above; the model only gives django-filter a queryset.
        model = TeamDailyCost
        fields: list[str] = []

    def explorer_query(self) -> ExplorerQuery:
        """The validated parameters as an ExplorerQuery (call after is_valid())."""
        data = self.form.cleaned_data
        filters = tuple((name, data[name]) for name, _ in DIMENSION_FILTERS if data.get(name))
        return ExplorerQuery(
            group_by=data.get("group_by") or "team",
            cost=data.get("cost") or AMORTISED,
            filters=filters,
            tag=tag_filter_parse(data["tag"]) if data.get("tag") else None,
        )

    def interval_value(self) -> str:
        return str(self.form.cleaned_data.get("interval") or "day")
