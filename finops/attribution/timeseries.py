"""Reads for the Grafana-friendly cost series of /api/v1/costs/?interval=: one flat point per
(bucket, key), the bucket a day, an ISO week (its Monday) or a month (its first day).

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

from billing_ingest.money import MoneySum
from finops.attribution.models import TeamDailyCost
from finops.attribution.selectors import COST_GROUP_BY, _exact_amounts, _visible
from finops.currency.selectors import money_round
from finops.org.models import Team

INTERVALS = ("day", "week", "month")


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
        _visible(rows_qs, teams=teams, include_unowned=include_unowned)
        .order_by()
        .values(key_field, "day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    exact = _exact_amounts(rows, currency=currency)
    sums: dict[tuple[date, str | None], Fraction] = defaultdict(Fraction)
    for row, value in zip(rows, exact, strict=True):
        sums[(bucket_start(row["day"], interval), row[key_field])] += value
    return [
        CostPoint(t=t, key=key, cost=money_round(value), currency=currency)
        for (t, key), value in sorted(
            sums.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or "")
        )
    ]
