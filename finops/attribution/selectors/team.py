"""Reads for the team month page: totals by category and the daily series, native and in the
reporting currency (from the TeamDailyCost rollup; a fixed number of queries).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import QuerySet

from finops.attribution.models import TeamDailyCost
from finops.attribution.selectors.reporting import (
    CATEGORIES,
    ZERO,
    CategoryRow,
    Reporting,
    converted_row,
    currency_order,
    exact_amounts,
    native_amounts,
)
from finops.core.money import MoneySum
from finops.currency.selectors import FxRateMissing, money_round
from finops.org.models import Team


@dataclass
class DailyPoint:
    day: date
    currency: str
    amount: Decimal
    # Bar length relative to the month's largest day in the same currency, 0..100.
    percent: Decimal = ZERO


@dataclass
class TeamMonth:
    team: Team
    month: date
    totals: list[CategoryRow]
    daily: list[DailyPoint]
    # Totals and the daily series in the reporting currency (converted), or the FX error.
    reporting: Reporting | None = None
    reporting_daily: list[DailyPoint] = field(default_factory=list)


def team_month(*, team: Team, month: date, reporting_currency: str | None = None) -> TeamMonth:
    """One team's month: totals by category (per currency) and the daily series, natively and
    converted to the reporting currency (default settings.FINOPS_REPORTING_CURRENCY)."""
    base = TeamDailyCost.objects.filter(billing_period=month, team=team).order_by()
    totals: dict[str, CategoryRow] = {}
    for item in base.values("billing_currency", "category").annotate(amount=MoneySum("amount")):
        row = totals.setdefault(item["billing_currency"], CategoryRow(item["billing_currency"]))
        row.by_category[item["category"]] += item["amount"]

    daily = [
        DailyPoint(day=d["day"], currency=d["billing_currency"], amount=d["amount"])
        for d in base.values("day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
        .order_by("billing_currency", "day")
    ]
    peaks: dict[str, Decimal] = defaultdict(lambda: ZERO)
    for point in daily:
        peaks[point.currency] = max(peaks[point.currency], point.amount)
    for point in daily:
        peak = peaks[point.currency]
        if peak > 0 and point.amount > 0:
            point.percent = (point.amount * 100 / peak).quantize(Decimal("0.1"))
    native_totals = [totals[c] for c in sorted(totals, key=currency_order)]
    reporting, reporting_daily = _team_reporting(
        base,
        currency=reporting_currency or settings.FINOPS_REPORTING_CURRENCY,
        native_totals=native_totals,
    )
    return TeamMonth(
        team=team,
        month=month,
        totals=native_totals,
        daily=daily,
        reporting=reporting,
        reporting_daily=reporting_daily,
    )


def _team_reporting(
    base: QuerySet[TeamDailyCost], *, currency: str, native_totals: list[CategoryRow]
) -> tuple[Reporting, list[DailyPoint]]:
    rows = list(
        base.order_by()
        .values("category", "day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    try:
        exact = exact_amounts(rows, currency=currency)
    except FxRateMissing as exc:
        return Reporting(currency=currency, error=str(exc)), []
    by_category = dict.fromkeys(CATEGORIES, Fraction(0))
    by_day: dict[date, Fraction] = defaultdict(Fraction)
    for row, value in zip(rows, exact, strict=True):
        by_category[row["category"]] += value
        by_day[row["day"]] += value
    daily = [
        DailyPoint(day=day, currency=currency, amount=money_round(value))
        for day, value in sorted(by_day.items())
    ]
    peak = max((p.amount for p in daily), default=ZERO)
    for point in daily:
        if peak > 0 and point.amount > 0:
            point.percent = (point.amount * 100 / peak).quantize(Decimal("0.1"))
    reporting = Reporting(
        currency=currency, total=converted_row(by_category, native=native_amounts(native_totals))
    )
    return reporting, daily
