"""Reads: a budget scope's daily cost, per provider, in the budget's currency, split into usage
and recurring charges.

- Team, provider and organisation scopes read the ledger rollup TeamDailyCost (by `day`, so a
  late charge on the next invoice counts on the day it was incurred).
- A tag scope reads the rollup TagCharge (the settled EffectiveCost carrying the tag, per
  charge period) and spreads each amount over its charge period by seconds, as attribution does.
- Recurring charges: the rollup RecurringCharge (settled line items whose ChargeCategory is one
  of FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES, monthly commitment fees and support, and whose
  charge period lasts a day or more), owned by the scope (a team: by its mapping rules and team
  tags, as attribution maps a non-GPU line). Hourly fees recur every hour: they are usage to
  the forecast.
- Never the line items: both rollups are written with the ledger. Many budgets share one read
  of the rollups (SeriesRollups.load): the budgets list costs the same queries for 1 or 100.
- Every amount is converted at its day's FX rate (finops.currency), exactly, as the overview.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db.models import Q

from finops.attribution.inputs.team_mapping import TeamResolver
from finops.attribution.models import RecurringCharge, TagCharge, TeamDailyCost
from finops.budgets.models import Budget
from finops.core.money import MoneySum
from finops.core.months import month_add
from finops.currency.selectors import RateTable

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


def month_bounds(first: date, last: date) -> tuple[date, date]:
    """Billing months that can hold days first..last (a day may sit on the next invoice)."""
    return month_add(first.replace(day=1), -1), month_add(last.replace(day=1), 1)


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


Row = tuple[date, str, str, Fraction]


@dataclass(frozen=True)
class _Window:
    """A budget's days first..last, and what of a rollup row falls in them."""

    first: date
    last: date

    def holds_month(self, month: date) -> bool:
        low, high = month_bounds(self.first, self.last)
        return low <= month <= high

    def overlaps(self, start: dt.datetime, end: dt.datetime) -> bool:
        return start < _midnight(self.last + timedelta(days=1)) and end > _midnight(self.first)


@dataclass(frozen=True)
class _Span:
    """A rollup row with a charge period (RecurringCharge, TagCharge)."""

    month: date
    start: dt.datetime
    end: dt.datetime
    provider: str
    currency: str
    amount: Decimal
    tags: dict[str, Any]
    sub_account: str = ""
    tag: tuple[str, str] = ("", "")


@dataclass
class SeriesRollups:
    """The rollups a set of budgets' series need over days first..last, read once: TeamDailyCost
    per (billing month, day, team, provider, currency), the RecurringCharge and TagCharge rows
    (tag rows of the budgets' tags only), the mapping rules, and the FX rates. A constant number
    of queries, whatever the number of budgets."""

    daily: list[tuple[date, date, int | None, str, str, Decimal]]
    recurring: list[_Span]
    tagged: list[_Span]
    resolver: TeamResolver | None
    rates: RateTable

    @classmethod
    def load(cls, *, budgets: Sequence[Budget], first: date, last: date) -> SeriesRollups:
        window = _Window(first, last)
        daily = _daily_rows(budgets, window)
        recurring = _recurring_spans(budgets, window)
        tagged = _tag_spans(budgets, window)
        owned = any(b.team_id and not b.tag_key for b in budgets)
        days = [r[1] for r in daily] + [s.start.date() for s in recurring + tagged]
        currencies = {b.currency for b in budgets} | {r[4] for r in daily}
        currencies |= {s.currency for s in recurring + tagged}
        rates = (
            RateTable.load(currencies=currencies, first_day=min(days), last_day=last)
            if days
            else RateTable()
        )
        resolver = TeamResolver.from_db() if owned else None
        return cls(daily=daily, recurring=recurring, tagged=tagged, resolver=resolver, rates=rates)


def _daily_rows(
    budgets: Sequence[Budget], window: _Window
) -> list[tuple[date, date, int | None, str, str, Decimal]]:
    untagged = [b for b in budgets if not b.tag_key]
    if not untagged:
        return []
    low, high = month_bounds(window.first, window.last)
    qs = TeamDailyCost.objects.filter(
        billing_period__gte=low,
        billing_period__lte=high,
        day__gte=window.first,
        day__lte=window.last,
    )
    if all(b.team_id or b.provider_name for b in untagged):
        qs = qs.filter(
            Q(team_id__in={b.team_id for b in untagged if b.team_id})
            | Q(provider_name__in={b.provider_name for b in untagged if b.provider_name})
        )
    rows = (
        qs.order_by()
        .values("billing_period", "day", "team_id", "provider_name", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    return [
        (
            r["billing_period"],
            r["day"],
            r["team_id"],
            r["provider_name"],
            r["billing_currency"],
            r["amount"],
        )
        for r in rows
    ]


def _span_filter(window: _Window) -> Q:
    low, high = month_bounds(window.first, window.last)
    return Q(
        billing_period__gte=low,
        billing_period__lte=high,
        charge_period_start__lt=_midnight(window.last + timedelta(days=1)),
        charge_period_end__gt=_midnight(window.first),
    )


_SPAN_VALUES = (
    "billing_period",
    "charge_period_start",
    "charge_period_end",
    "provider_name",
    "billing_currency",
    "amount",
)


def _recurring_spans(budgets: Sequence[Budget], window: _Window) -> list[_Span]:
    if not budgets:
        return []
    qs = RecurringCharge.objects.filter(_span_filter(window))
    if all(b.provider_name for b in budgets):
        qs = qs.filter(provider_name__in={b.provider_name for b in budgets})
    values = qs.order_by().values_list(*_SPAN_VALUES, "tags", "sub_account_id")
    return [
        _span(row, tags=row[6] if isinstance(row[6], dict) else {}, sub_account=row[7])
        for row in values
    ]


def _span(row: tuple[Any, ...], **extra: Any) -> _Span:
    month, start, end, provider, currency, amount = row[:6]
    return _Span(month, start, end, provider, currency, amount, **extra)


def _tag_spans(budgets: Sequence[Budget], window: _Window) -> list[_Span]:
    tags = {(b.tag_key, b.tag_value) for b in budgets if b.tag_key}
    if not tags:
        return []
    wanted = Q()
    for key, value in sorted(tags):
        wanted |= Q(tag_key=key, tag_value=value)
    qs = TagCharge.objects.filter(_span_filter(window)).filter(wanted)
    values = qs.order_by().values_list(*_SPAN_VALUES, "tag_key", "tag_value")
    return [_span(row, tags={}, tag=(row[6], row[7])) for row in values]


def _spread(spans: Iterable[_Span], window: _Window) -> Iterator[Row]:
    for span in spans:
        for day, part in spread_by_day(
            start=span.start,
            end=span.end,
            amount=Fraction(span.amount),
            first=window.first,
            last=window.last,
        ):
            yield day, span.provider, span.currency, part


def _in_window(span: _Span, window: _Window) -> bool:
    return window.holds_month(span.month) and window.overlaps(span.start, span.end)


def _tag_is(tags: object, budget: Budget) -> bool:
    return isinstance(tags, dict) and str(tags.get(budget.tag_key, "")) == budget.tag_value


def _owned_by(span: _Span, budget: Budget, resolver: TeamResolver | None) -> bool:
    if budget.provider_name and span.provider != budget.provider_name:
        return False
    if budget.tag_key:
        return _tag_is(span.tags, budget)
    team = budget.team
    if not budget.team_id or team is None or resolver is None:
        return True
    return resolver.line_team(tags=span.tags, sub_account=span.sub_account) in (team.pk, team.slug)


def _total_rows(budget: Budget, window: _Window, rollups: SeriesRollups) -> list[Row]:
    if budget.tag_key:
        tag = (budget.tag_key, budget.tag_value)
        spans = (s for s in rollups.tagged if s.tag == tag and _in_window(s, window))
        return list(_spread(spans, window))
    sums: dict[tuple[date, str, str], Fraction] = defaultdict(Fraction)
    # Every budget's windows walk every daily rollup row (the budgets list: 21 budgets x 5
    # windows x 2,200 rows at 10,000 nodes), so the cheap tests come first and the window's
    # months are worked out once, not per row (window.holds_month): 54 -> 9 ms a list (cProfile).
    low, high = month_bounds(window.first, window.last)
    first, last = window.first, window.last
    # Read once: a model's foreign-key id is a descriptor call on every read.
    team, provider_name = budget.team_id, budget.provider_name
    for month, day, team_id, provider, currency, amount in rollups.daily:
        if team and team_id != team:
            continue
        if provider_name and provider != provider_name:
            continue
        if not (low <= month <= high and first <= day <= last):
            continue
        sums[(day, provider, currency)] += Fraction(amount)
    return [(day, provider, currency, amount) for (day, provider, currency), amount in sums.items()]


def _recurring_rows(budget: Budget, window: _Window, rollups: SeriesRollups) -> list[Row]:
    spans = (
        s
        for s in rollups.recurring
        if _in_window(s, window) and _owned_by(s, budget, rollups.resolver)
    )
    return list(_spread(spans, window))


def scope_series(
    *,
    budget: Budget,
    first: date,
    last: date,
    currency: str,
    rollups: SeriesRollups | None = None,
) -> ScopeSeries:
    """The scope's cost per provider and day in first..last, converted to `currency`, from
    `rollups` (loaded over at least first..last; read for this budget alone when None).
    FxRateMissing when a day's rate is missing."""
    if rollups is None:
        rollups = SeriesRollups.load(budgets=[budget], first=first, last=last)
    window = _Window(first, last)
    total_rows = _total_rows(budget, window, rollups)
    recurring_rows = _recurring_rows(budget, window, rollups)
    series = ScopeSeries()
    for target, rows in ((series.total, total_rows), (series.recurring, recurring_rows)):
        # Earliest day first, so a missing rate names the first day that lacks one.
        for day, provider, code, amount in sorted(rows, key=lambda r: (r[0], r[2])):
            rate = rollups.rates.rate(day=day, from_currency=code, to_currency=currency)
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
