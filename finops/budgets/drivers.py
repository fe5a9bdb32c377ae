"""Reads: what drives a budget's spend, the biggest runs, services and endpoints of its period
to date in the budget's currency (exact sums; converted at the daily rates)."""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, localcontext
from fractions import Fraction

from django.db.models import Case, DateField, F, Value, When

from finops.attribution.models import AllocatedCost
from finops.budgets.models import Budget
from finops.budgets.periods import Period
from finops.core.money import EXACT, MoneySum
from finops.core.months import month_add
from finops.currency.selectors import FxRateMissing, converter_for, money_round

DRIVERS = 5


@dataclass
class Driver:
    dimension: str
    key: str
    amount: Decimal


def budget_drivers(*, budget: Budget, period: Period, as_of: date) -> dict[str, list[Driver]]:
    """The DRIVERS biggest runs, services and endpoints of the period to as_of, converted.
    A tag budget has no ledger rows of its own: its services come from its line items."""
    if budget.tag_key:
        return {"services": []}
    qs = AllocatedCost.objects.filter(
        billing_period__gte=month_add(period.start, -1),
        billing_period__lte=month_add(period.end.replace(day=1), 1),
        day__gte=period.start,
        day__lte=min(as_of, period.end),
    )
    if budget.team_id:
        qs = qs.filter(team_id=budget.team_id)
    elif budget.provider_name:
        qs = qs.filter(provider_name=budget.provider_name)
    # Grouped by day only where a rate is needed (rows in another currency): rows already in
    # the budget's currency are summed per key in the database, exactly (issue 29: per run and
    # day the organisation's period was ~8,000 rows read and converted by Django per driver).
    rate_day = Case(
        When(billing_currency=budget.currency, then=Value(None)),
        default=F("day"),
        output_field=DateField(),
    )
    out: dict[str, list[Driver]] = {}
    for dimension, column in (
        ("runs", "run_id"),
        ("services", "service_name"),
        ("endpoints", "job__endpoint"),
    ):
        rows = list(
            qs.exclude(**{column: ""})
            .exclude(**{f"{column}__isnull": True})
            .order_by()
            .annotate(rate_day=rate_day)
            .values(column, "rate_day", "billing_currency")
            .annotate(amount=MoneySum("amount"))
        )
        out[dimension] = _top(dimension, column, rows, budget.currency)
    return out


def _top(dimension: str, column: str, rows: list[dict], currency: str) -> list[Driver]:
    if not rows:
        return []
    # Rows already in the budget's currency (one per key, rate_day None) are summed as Decimals,
    # exactly (enough digits for any sum of 12-place amounts): they need no rate, no Fraction.
    same: dict[str, Decimal] = defaultdict(Decimal)
    others = [r for r in rows if r["billing_currency"] != currency]
    with localcontext(EXACT):
        for r in rows:
            if r["billing_currency"] == currency:
                same[r[column]] += r["amount"]
    if not others:
        # Ranked as Decimals (comparisons are exact): thousands of runs need no Fraction. By
        # key first, so nlargest (stable) breaks ties by key, as the Fraction ranking below.
        by_key = sorted(same.items(), key=lambda kv: kv[0])
        top = heapq.nlargest(DRIVERS, by_key, key=lambda kv: kv[1])
        return [Driver(dimension, key, money_round(v).quantize(Decimal("0.01"))) for key, v in top]
    sums: dict[str, Fraction] = {key: Fraction(value) for key, value in same.items()}
    try:
        converter = converter_for(
            to_currency=currency,
            currencies={r["billing_currency"] for r in others},
            first_day=min(r["rate_day"] for r in others),
            last_day=max(r["rate_day"] for r in others),
        )
        for r in others:
            sums[r[column]] = sums.get(r[column], Fraction(0)) + converter.exact(
                day=r["rate_day"], currency=r["billing_currency"], amount=r["amount"]
            )
    except FxRateMissing:
        return []
    ranked = heapq.nsmallest(DRIVERS, sums.items(), key=lambda kv: (-kv[1], kv[0]))
    return [Driver(dimension, key, money_round(v).quantize(Decimal("0.01"))) for key, v in ranked]
