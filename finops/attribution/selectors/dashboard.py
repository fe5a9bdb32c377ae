"""The overview dashboard: cost over time, this month vs last per team, idle and unallocated as
shares of the bill. Reads the TeamDailyCost rollup only, in one query plus the FX rates.

Amounts are in the rollup's one currency when the span has only one; with several, everything is
converted per day to the reporting currency (never added unconverted). A missing rate is shown as
an error and the default currency's rows are shown alone, labelled as such.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet

from finops.attribution.models import Category, TeamDailyCost
from finops.core.money import EXACT, MoneySum
from finops.core.months import month_add
from finops.currency.selectors import FxRateMissing, converter_for, money_round
from finops.org.models import Team

CATEGORIES: list[str] = [str(c.value) for c in Category]
GROUP_BY = ("team", "category")
MIN_MONTHS, MAX_MONTHS, DEFAULT_MONTHS = 3, 12, 6
ZERO = Decimal(0)
NO_TEAM = "No team (platform)"
_ROW_FIELDS = (
    "billing_period", "day", "team_id", "team__slug", "team__name", "category", "billing_currency",
)  # fmt: skip


@dataclass
class DayRow:
    day: date
    # One amount per series, in Dashboard.series order.
    amounts: list[Decimal]

    @property
    def total(self) -> Decimal:
        return sum(self.amounts, ZERO)


@dataclass
class TeamChange:
    team: Team | None
    this_month: Decimal
    last_month: Decimal

    @property
    def change(self) -> Decimal:
        return self.this_month - self.last_month

    @property
    def change_share(self) -> Decimal | None:
        """Change as a share (0.1 = +10 %) of last month; None when last month had nothing."""
        return self.change / self.last_month if self.last_month else None


@dataclass
class BillShares:
    total: Decimal
    idle: Decimal
    unallocated: Decimal

    @property
    def idle_share(self) -> Decimal | None:
        return self.idle / self.total if self.total else None

    @property
    def unallocated_share(self) -> Decimal | None:
        return self.unallocated / self.total if self.total else None


@dataclass
class Dashboard:
    month: date
    first_month: date
    months: int
    group_by: str
    currency: str
    # True when several billing currencies were converted to `currency` per day.
    converted: bool = False
    # The FX error that stopped the conversion ("" when none): figures are `currency` rows only.
    error: str = ""
    # Series labels (team names or categories), in column order.
    series: list[str] = field(default_factory=list)
    days: list[DayRow] = field(default_factory=list)
    changes: list[TeamChange] = field(default_factory=list)
    shares: BillShares | None = None
    # The previous month, which `changes` compare with.
    last_month: date | None = None


class _Sum:
    """An exact sum: the amounts that needed no rate as a Decimal (a Fraction for each of the
    thousands of team-day rows was most of the dashboard's time), the converted ones as a
    Fraction; rounded once, as money_round rounds either."""

    __slots__ = ("converted", "same")

    def __init__(self) -> None:
        self.same = ZERO
        self.converted: Fraction | None = None

    def add(self, amount: Fraction | Decimal) -> None:
        if isinstance(amount, Decimal):
            # Exact in EXACT's digits (12 places, far fewer whole digits).
            self.same = EXACT.add(self.same, amount)
        else:
            self.converted = amount if self.converted is None else self.converted + amount

    def merge(self, other: _Sum) -> None:
        self.same = EXACT.add(self.same, other.same)
        if other.converted is not None:
            self.add(other.converted)

    def rounded(self) -> Decimal:
        if self.converted is None:
            return money_round(self.same)
        return money_round(self.converted + Fraction(self.same) if self.same else self.converted)


def overview_dashboard(
    *,
    month: date,
    months: int,
    group_by: str,
    teams: QuerySet[Team],
    include_unowned: bool,
    reporting_currency: str | None = None,
) -> Dashboard:
    """The `months` billing months ending with `month` (clamped to 3..12), daily, by team or
    category; `month` against the month before per team; idle and unallocated shares of `month`."""
    months = min(MAX_MONTHS, max(MIN_MONTHS, months))
    group_by = group_by if group_by in GROUP_BY else GROUP_BY[0]
    first = month_add(month, 1 - months)
    condition = Q(team__in=teams) | Q(team__isnull=True) if include_unowned else Q(team__in=teams)
    rows = list(
        TeamDailyCost.objects.filter(condition, billing_period__range=(first, month))
        .order_by()
        .values(*_ROW_FIELDS)
        .annotate(amount=MoneySum("amount"))
    )
    # Day order: a missing FX rate is reported for the first day that lacks one.
    rows.sort(key=lambda r: (r["day"], r["billing_currency"]))
    dashboard = Dashboard(
        month=month,
        first_month=first,
        months=months,
        group_by=group_by,
        currency=reporting_currency or settings.FINOPS_REPORTING_CURRENCY,
        last_month=month_add(month, -1),
    )
    amounts = _amounts(rows, dashboard)
    _fill_series(dashboard, rows, amounts)
    _fill_changes(dashboard, rows, amounts)
    return dashboard


def _amounts(rows: list[dict[str, Any]], dashboard: Dashboard) -> list[Fraction | Decimal | None]:
    """Each row's amount in the dashboard's currency, exactly (a Decimal where no rate applies);
    None for a row left out."""
    currencies = {r["billing_currency"] for r in rows}
    if len(currencies) <= 1:
        if currencies:
            dashboard.currency = currencies.pop()
        return [r["amount"] for r in rows]
    try:
        converter = converter_for(
            to_currency=dashboard.currency,
            currencies=currencies,
            first_day=rows[0]["day"],
            last_day=rows[-1]["day"],
        )
        exact: list[Fraction | Decimal | None] = [
            converter.exact(day=r["day"], currency=r["billing_currency"], amount=r["amount"])
            for r in rows
        ]
    except FxRateMissing as exc:
        dashboard.error = str(exc)
        dashboard.currency = settings.FINOPS_DEFAULT_CURRENCY
        return [r["amount"] if r["billing_currency"] == dashboard.currency else None for r in rows]
    dashboard.converted = True
    return exact


def _fill_series(
    dashboard: Dashboard, rows: list[dict[str, Any]], amounts: list[Fraction | Decimal | None]
) -> None:
    """Daily amounts per team (by name, the no-team bucket last) or per category."""
    by_day: dict[date, dict[Any, _Sum]] = defaultdict(lambda: defaultdict(_Sum))
    labels: dict[Any, str] = {}
    for row, amount in zip(rows, amounts, strict=True):
        if amount is None:
            continue
        if dashboard.group_by == "team":
            key = row["team_id"]
            labels[key] = row["team__name"] or NO_TEAM
        else:
            key = row["category"]
        by_day[row["day"]][key].add(amount)
    if dashboard.group_by == "team":
        keys = sorted(labels, key=lambda k: (k is None, labels[k]))
        dashboard.series = [labels[k] for k in keys]
    else:
        present = {k for values in by_day.values() for k in values}
        keys = [c for c in CATEGORIES if c in present]
        dashboard.series = keys
    dashboard.days = [
        DayRow(day, [values[k].rounded() if k in values else money_round(ZERO) for k in keys])
        for day, values in sorted(by_day.items())
    ]


def _fill_changes(
    dashboard: Dashboard, rows: list[dict[str, Any]], amounts: list[Fraction | Decimal | None]
) -> None:
    """Per team: the month against the month before; the month's idle and unallocated."""
    this: dict[int | None, _Sum] = defaultdict(_Sum)
    last: dict[int | None, _Sum] = defaultdict(_Sum)
    teams: dict[int | None, Team | None] = {}
    by_category: dict[str, _Sum] = defaultdict(_Sum)
    for row, amount in zip(rows, amounts, strict=True):
        if amount is None or row["billing_period"] not in (dashboard.month, dashboard.last_month):
            continue
        team_id = row["team_id"]
        if team_id not in teams:
            teams[team_id] = (
                Team(id=team_id, slug=row["team__slug"], name=row["team__name"])
                if team_id is not None
                else None
            )
        if row["billing_period"] == dashboard.month:
            this[team_id].add(amount)
            by_category[row["category"]].add(amount)
        else:
            last[team_id].add(amount)
    dashboard.changes = sorted(
        (
            TeamChange(team, this[team_id].rounded(), last[team_id].rounded())
            for team_id, team in teams.items()
        ),
        key=lambda c: (c.team is None, c.team.name if c.team else ""),
    )
    if by_category:
        total = _Sum()
        for part in by_category.values():
            total.merge(part)
        dashboard.shares = BillShares(
            total=total.rounded(),
            idle=by_category[Category.IDLE].rounded(),
            unallocated=by_category[Category.UNALLOCATED].rounded(),
        )


def team_daily_by_category(
    *, team: Team, month: date, reporting_currency: str | None = None
) -> Dashboard:
    """One team's month, daily by category (the team page's chart): one query plus the rates."""
    fields = ("billing_period", "day", "team_id", "category", "billing_currency")
    rows: list[dict[str, Any]] = list(
        TeamDailyCost.objects.filter(team=team, billing_period=month)
        .order_by()
        .values(*fields)
        .annotate(amount=MoneySum("amount"))
    )
    rows.sort(key=lambda r: (r["day"], r["billing_currency"]))
    dashboard = Dashboard(
        month=month,
        first_month=month,
        months=1,
        group_by="category",
        currency=reporting_currency or settings.FINOPS_REPORTING_CURRENCY,
    )
    _fill_series(dashboard, rows, _amounts(rows, dashboard))
    return dashboard
