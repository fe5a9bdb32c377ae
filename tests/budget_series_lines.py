"""The budget series as computed before the budget rollups (RecurringCharge, TagCharge): from
the settled line items, read at request time. Kept as the reference the rollup-based series
(finops.budgets.series) must equal exactly."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from datetime import date, timedelta
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from billing_ingest.models import CostLineItem
from finops.attribution.inputs.team_mapping import TeamResolver
from finops.budgets.models import Budget
from finops.budgets.series import month_bounds, spread_by_day

Row = tuple[date, str, str, Fraction]
_LINE_VALUES = (
    "charge_period_start",
    "charge_period_end",
    "provider_name",
    "billing_currency",
    "effective_cost",
)


def _midnight(day: date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)


def _window(qs: QuerySet[CostLineItem], first: date, last: date) -> QuerySet[CostLineItem]:
    low, high = month_bounds(first, last)
    return (
        qs.filter(billing_period__gte=low, billing_period__lte=high)
        .filter(charge_period_start__lt=_midnight(last + timedelta(days=1)))
        .filter(charge_period_end__gt=_midnight(first))
    )


def _line_rows(lines: Iterable[tuple[Any, ...]], first: date, last: date) -> Iterator[Row]:
    for start, end, provider, currency, cost in lines:
        for day, part in spread_by_day(
            start=start, end=end, amount=Fraction(cost), first=first, last=last
        ):
            yield day, provider, currency, part


def _tag_is(tags: object, budget: Budget) -> bool:
    return isinstance(tags, dict) and str(tags.get(budget.tag_key, "")) == budget.tag_value


def tag_scope_rows(budget: Budget, first: date, last: date) -> list[Row]:
    qs = _window(CostLineItem.objects.settled(), first, last).filter(tags__has_key=budget.tag_key)
    rows = qs.values_list("tags", *_LINE_VALUES)
    return list(_line_rows((r[1:] for r in rows if _tag_is(r[0], budget)), first, last))


def recurring_rows(budget: Budget, first: date, last: date) -> list[Row]:
    qs = _window(CostLineItem.objects.settled(), first, last).filter(
        charge_category__in=settings.FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES
    )
    if budget.provider_name:
        qs = qs.filter(provider_name=budget.provider_name)
    resolver = TeamResolver.from_db() if budget.team_id and not budget.tag_key else None
    team = budget.team
    kept = []
    for tags, sub_account, *values in qs.values_list("tags", "sub_account_id", *_LINE_VALUES):
        start, end = values[0], values[1]
        if end - start < timedelta(days=1) or not values[4]:
            continue
        tags = tags if isinstance(tags, dict) else {}
        if budget.tag_key and not _tag_is(tags, budget):
            continue
        if resolver is not None and team is not None:
            owner = resolver.line_team(tags=tags, sub_account=sub_account)
            if owner not in (team.pk, team.slug):
                continue
        kept.append(tuple(values))
    return list(_line_rows(kept, first, last))
