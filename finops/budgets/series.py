"""Reads: a budget scope's daily cost, per provider, in the budget's currency, split into usage
and recurring charges.

- Team, provider and organisation scopes read the ledger rollup TeamDailyCost (by `day`, so a
  late charge on the next invoice counts on the day it was incurred).
- A tag scope reads the settled line items carrying the tag and spreads each one's
  EffectiveCost over its charge period by seconds, as attribution does.
- Recurring charges: settled line items whose ChargeCategory is one of
  FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES (monthly commitment fees, support) and whose charge
  period lasts a day or more, owned by the scope (a team: by its mapping rules and team tags, as
  attribution maps a non-GPU line). Hourly fees recur every hour: they are usage to the forecast.
- Every amount is converted at its day's FX rate (finops.currency), exactly, as the overview.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from billing_ingest.models import CostLineItem
from billing_ingest.money import MoneySum
from billing_ingest.months import month_add
from finops.attribution.models import TeamDailyCost
from finops.attribution.team_mapping import TeamResolver
from finops.budgets.models import Budget
from finops.currency.selectors import converter_for

DAY_SECONDS = 86400
Daily = dict[date, Fraction]


def _daily() -> Daily:
    return defaultdict(Fraction)


@dataclass
class ScopeSeries:
    """Per provider: cost per day (all of it), and the recurring part of it, exact."""

    total: dict[str, Daily] = field(default_factory=lambda: defaultdict(_daily))
    recurring: dict[str, Daily] = field(default_factory=lambda: defaultdict(_daily))

    def providers(self) -> list[str]:
        return sorted(set(self.total) | set(self.recurring))


def _month_bounds(first: date, last: date) -> tuple[date, date]:
    """Billing months that can hold days first..last (a day may sit on the next invoice)."""
    return month_add(first.replace(day=1), -1), month_add(last.replace(day=1), 1)


def _ledger_rows(budget: Budget, first: date, last: date) -> Iterator[Any]:
    low, high = _month_bounds(first, last)
    qs: QuerySet[TeamDailyCost] = TeamDailyCost.objects.filter(
        billing_period__gte=low, billing_period__lte=high, day__gte=first, day__lte=last
    )
    if budget.team_id:
        qs = qs.filter(team_id=budget.team_id)
    elif budget.provider_name:
        qs = qs.filter(provider_name=budget.provider_name)
    yield from (
        qs.order_by()
        .values("day", "provider_name", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )


def _tagged_lines(budget: Budget, first: date, last: date) -> QuerySet[CostLineItem]:
    low, high = _month_bounds(first, last)
    return (
        CostLineItem.objects.settled()
        .filter(billing_period__gte=low, billing_period__lte=high)
        .filter(charge_period_start__lt=_midnight(last + timedelta(days=1)))
        .filter(charge_period_end__gt=_midnight(first))
        .filter(tags__has_key=budget.tag_key)
    )


def _midnight(day: date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)


def spread_by_day(
    *, start: dt.datetime, end: dt.datetime, amount: Fraction, first: date, last: date
) -> Iterator[tuple[date, Fraction]]:
    """The amount over the UTC days of [start, end) by seconds (all on the first day when the
    period is empty), the days first..last only."""
    if end <= start:
        if first <= start.date() <= last:
            yield start.date(), amount
        return
    total = Fraction(int((end - start).total_seconds()))
    day = max(start.date(), first)
    while day <= min((end - timedelta(microseconds=1)).date(), last):
        lo, hi = max(start, _midnight(day)), min(end, _midnight(day + timedelta(days=1)))
        if hi > lo:
            yield day, amount * int((hi - lo).total_seconds()) / total
        day += timedelta(days=1)


def _line_rows(
    lines: Iterable[tuple[Any, ...]], first: date, last: date
) -> Iterator[tuple[date, str, str, Fraction]]:
    for start, end, provider, currency, cost in lines:
        for day, part in spread_by_day(
            start=start, end=end, amount=Fraction(cost), first=first, last=last
        ):
            yield day, provider, currency, part


_LINE_VALUES = (
    "charge_period_start",
    "charge_period_end",
    "provider_name",
    "billing_currency",
    "effective_cost",
)


def _tag_scope_rows(
    budget: Budget, first: date, last: date
) -> Iterator[tuple[date, str, str, Fraction]]:
    wanted = budget.tag_value
    rows = _tagged_lines(budget, first, last).values_list("tags", *_LINE_VALUES)
    matching = (r[1:] for r in rows.iterator(chunk_size=5000) if _tag_is(r[0], budget, wanted))
    yield from _line_rows(matching, first, last)


def _tag_is(tags: object, budget: Budget, wanted: str) -> bool:
    return isinstance(tags, dict) and str(tags.get(budget.tag_key, "")) == wanted


def _recurring_rows(
    budget: Budget, first: date, last: date
) -> Iterator[tuple[date, str, str, Fraction]]:
    low, high = _month_bounds(first, last)
    qs = (
        CostLineItem.objects.settled()
        .filter(billing_period__gte=low, billing_period__lte=high)
        .filter(charge_category__in=settings.FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES)
        .filter(charge_period_start__lt=_midnight(last + timedelta(days=1)))
        .filter(charge_period_end__gt=_midnight(first))
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
        if budget.tag_key and not _tag_is(tags, budget, budget.tag_value):
            continue
        if resolver is not None and team is not None:
            owner = resolver.line_team(tags=tags, sub_account=sub_account)
            if owner not in (team.pk, team.slug):
                continue
        kept.append(tuple(values))
    yield from _line_rows(kept, first, last)


def scope_series(*, budget: Budget, first: date, last: date, currency: str) -> ScopeSeries:
    """The scope's cost per provider and day in first..last, converted to `currency`.
    FxRateMissing when a day's rate is missing."""
    if budget.tag_key:
        total_rows = list(_tag_scope_rows(budget, first, last))
    else:
        total_rows = [
            (r["day"], r["provider_name"], r["billing_currency"], Fraction(r["amount"]))
            for r in _ledger_rows(budget, first, last)
        ]
    recurring_rows = list(_recurring_rows(budget, first, last))
    everything = total_rows + recurring_rows
    series = ScopeSeries()
    if not everything:
        return series
    converter = converter_for(
        to_currency=currency,
        currencies={r[2] for r in everything},
        first_day=min(r[0] for r in everything),
        last_day=max(r[0] for r in everything),
    )
    for target, rows in ((series.total, total_rows), (series.recurring, recurring_rows)):
        # Earliest day first, so a missing rate names the first day that lacks one.
        for day, provider, code, amount in sorted(rows, key=lambda r: (r[0], r[2])):
            rate = converter.table.rate(day=day, from_currency=code, to_currency=currency)
            target[provider][day] += amount * rate
    return series


def ledger_currencies(*, budget: Budget | None = None) -> set[str]:
    """The billing currencies in the ledger (the budget's scope when given)."""
    qs = TeamDailyCost.objects.all()
    if budget is not None and budget.team_id:
        qs = qs.filter(team_id=budget.team_id)
    elif budget is not None and budget.provider_name:
        qs = qs.filter(provider_name=budget.provider_name)
    return set(qs.order_by().values_list("billing_currency", flat=True).distinct())


def last_ledger_day(*, month: date | None = None) -> date | None:
    """The newest day in the ledger rollups (of that billing month when given)."""
    qs = TeamDailyCost.objects.all()
    if month is not None:
        qs = qs.filter(billing_period=month.replace(day=1))
    return qs.order_by("-day").values_list("day", flat=True).first()
