"""Reads for the cost series of /api/v1/costs/: per key and day within a month (cost_series),
or the Grafana-friendly ?interval= form (cost_points): one flat point per (bucket, key), the
bucket a day, an ISO week (its Monday) or a month (its first day).

From the TeamDailyCost rollup, never the ledger. Each day's amount is converted at its day's
FX rate (finops.currency), the exact values summed per bucket and rounded once, so a week's
point is the correctly rounded sum of its days, not a sum of rounded days.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction

from django.db.models import QuerySet

from finops.attribution.models import TeamDailyCost
from finops.attribution.selectors.reporting import (
    ZERO,
    NativeAmount,
    currency_order,
    exact_amounts,
    visible_to,
)
from finops.core.money import MoneySum
from finops.currency.selectors import money_round
from finops.org.models import Team

INTERVALS = ("day", "week", "month")


COST_GROUP_BY = {"team": "team__slug", "provider": "provider_name", "category": "category"}


@dataclass
class SeriesPoint:
    day: date
    amount: Decimal


@dataclass
class CostSeries:
    # Team slug (None: no team, finance only), provider name or category.
    key: str | None
    label: str
    total: Decimal
    points: list[SeriesPoint]


@dataclass
class CostSeriesReport:
    month: date
    currency: str
    group_by: str
    total: Decimal
    native_totals: list[NativeAmount]
    series: list[CostSeries]


def cost_series(
    *,
    month: date,
    teams: QuerySet[Team],
    include_unowned: bool,
    currency: str,
    group_by: str = "team",
) -> CostSeriesReport:
    """Daily attributed cost of a billing month per team, provider or category, converted to
    `currency` per day (each figure rounded once). FxRateMissing when a rate is missing.
    Days without cost are left out of a series. Three queries at most, however many rows."""
    key_field = COST_GROUP_BY[group_by]
    base = visible_to(
        TeamDailyCost.objects.filter(billing_period=month),
        teams=teams,
        include_unowned=include_unowned,
    )
    rows = list(
        base.order_by()
        .values(key_field, "team__name", "day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    exact = exact_amounts(rows, currency=currency)
    points: dict[str | None, dict[date, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    labels: dict[str | None, str] = {}
    native: dict[str, Decimal] = defaultdict(lambda: ZERO)
    for row, value in zip(rows, exact, strict=True):
        key = row[key_field]
        points[key][row["day"]] += value
        native[row["billing_currency"]] += row["amount"]
        if group_by == "team":
            labels[key] = row["team__name"] or "No team (platform)"
        else:
            labels[key] = key or "(none)"
    series = [
        CostSeries(
            key=key,
            label=labels[key],
            total=money_round(sum(days.values(), Fraction(0))),
            points=[SeriesPoint(day, money_round(v)) for day, v in sorted(days.items())],
        )
        for key, days in sorted(points.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
    ]
    return CostSeriesReport(
        month=month,
        currency=currency,
        group_by=group_by,
        total=money_round(sum(exact, Fraction(0))),
        native_totals=[NativeAmount(c, native[c]) for c in sorted(native, key=currency_order)],
        series=series,
    )


def bucket_start(day: date, interval: str) -> date:
    """The first day of the bucket that holds `day`: itself, its ISO week's Monday, or the
    first of its month."""
    if interval == "day":
        return day
    if interval == "week":
        return day - timedelta(days=day.weekday())
    if interval == "month":
        return day.replace(day=1)
    raise ValueError(f"interval must be one of {', '.join(INTERVALS)}")


@dataclass(frozen=True)
class CostPoint:
    t: date
    key: str | None  # team slug (None: no team, finance only), provider or category
    cost: Decimal
    currency: str


def cost_points(
    *,
    teams: QuerySet[Team],
    include_unowned: bool,
    currency: str,
    group_by: str,
    interval: str,
    month: date | None = None,
    since: date | None = None,
    until: date | None = None,
) -> list[CostPoint]:
    """Cost per bucket and key, oldest bucket first, keys in order (no team last). Either a
    billing month (its rows, whatever day they fall on) or days since..until (inclusive, of
    any billing month). Buckets without cost are left out. FxRateMissing when a rate is
    missing. Two queries at most (rows, rates), however many rows."""
    key_field = COST_GROUP_BY[group_by]
    rows_qs = TeamDailyCost.objects.all()
    if month is not None:
        rows_qs = rows_qs.filter(billing_period=month)
    if since is not None:
        rows_qs = rows_qs.filter(day__gte=since)
    if until is not None:
        rows_qs = rows_qs.filter(day__lte=until)
    rows = list(
        visible_to(rows_qs, teams=teams, include_unowned=include_unowned)
        .order_by()
        .values(key_field, "day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    exact = exact_amounts(rows, currency=currency)
    sums: dict[tuple[date, str | None], Fraction] = defaultdict(Fraction)
    for row, value in zip(rows, exact, strict=True):
        sums[(bucket_start(row["day"], interval), row[key_field])] += value
    return [
        CostPoint(t=t, key=key, cost=money_round(value), currency=currency)
        for (t, key), value in sorted(
            sums.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or "")
        )
    ]
