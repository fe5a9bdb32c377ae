"""Reads for the month overview page and the months with data (from the TeamDailyCost rollup).

A fixed number of aggregate queries, whatever the number of rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from fractions import Fraction

from django.conf import settings
from django.db.models import QuerySet

from billing_ingest.selectors import billing_months_settled
from finops.attribution.models import TeamDailyCost
from finops.attribution.selectors.reporting import (
    CATEGORIES,
    CategoryRow,
    NativeAmount,
    ProviderRow,
    Reporting,
    converted_row,
    currency_order,
    exact_amounts,
    native_amounts,
    visible_to,
)
from finops.core.money import MoneySum
from finops.currency.selectors import FxRateMissing, money_round
from finops.org.models import Team

# --- months -------------------------------------------------------------------------------


def month_list_with_data() -> list[date]:
    """Billing months that have settled line items or attributed cost, newest first. Two small
    queries (the settled billing batches' months and the rollup's), whatever the size of the
    bill: every page's month picker reads it, and a newly imported month shows at once."""
    months = billing_months_settled()
    months |= set(
        TeamDailyCost.objects.order_by().values_list("billing_period", flat=True).distinct()
    )
    return sorted(months, reverse=True)


@dataclass
class MonthOverview:
    month: date
    # One row per (team, currency); team None is the unowned bucket (finance only).
    teams: list[CategoryRow]
    # One row per currency: the sum of the team rows above.
    totals: list[CategoryRow]
    providers: list[ProviderRow]
    # The same figures in the reporting currency (converted), or the FX error.
    reporting: Reporting | None = None


def month_overview(
    *,
    month: date,
    teams: QuerySet[Team],
    include_unowned: bool,
    reporting_currency: str | None = None,
) -> MonthOverview:
    """Attributed cost of a billing month by team and category, by currency and by provider,
    and converted to the reporting currency (default settings.FINOPS_REPORTING_CURRENCY)."""
    base = visible_to(
        TeamDailyCost.objects.filter(billing_period=month),
        teams=teams,
        include_unowned=include_unowned,
    )
    rows: dict[tuple[int | None, str], CategoryRow] = {}
    totals: dict[str, CategoryRow] = {}
    grouped = (
        base.order_by()
        .values("team_id", "team__slug", "team__name", "billing_currency", "category")
        .annotate(amount=MoneySum("amount"))
    )
    for item in grouped:
        key = (item["team_id"], item["billing_currency"])
        if key not in rows:
            team = None
            if item["team_id"] is not None:
                team = Team(id=item["team_id"], slug=item["team__slug"], name=item["team__name"])
            rows[key] = CategoryRow(currency=item["billing_currency"], team=team)
        rows[key].by_category[item["category"]] += item["amount"]
        total = totals.setdefault(item["billing_currency"], CategoryRow(item["billing_currency"]))
        total.by_category[item["category"]] += item["amount"]

    providers = [
        ProviderRow(provider=p["provider_name"], currency=p["billing_currency"], amount=p["amount"])
        for p in base.order_by()
        .values("provider_name", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    ]
    providers.sort(key=lambda p: (currency_order(p.currency), p.provider))
    # Named teams alphabetically, the unowned bucket last.
    team_rows = sorted(
        rows.values(),
        key=lambda r: (r.team is None, r.team.name if r.team else "", currency_order(r.currency)),
    )
    native_totals = [totals[c] for c in sorted(totals, key=currency_order)]
    team_by_id = {r.team.id: r.team for r in team_rows if r.team is not None}
    return MonthOverview(
        month=month,
        teams=team_rows,
        totals=native_totals,
        providers=providers,
        reporting=_overview_reporting(
            base,
            currency=reporting_currency or settings.FINOPS_REPORTING_CURRENCY,
            native_rows=team_rows,
            native_totals=native_totals,
            team_by_id=team_by_id,
        ),
    )


def _overview_reporting(
    base: QuerySet[TeamDailyCost],
    *,
    currency: str,
    native_rows: list[CategoryRow],
    native_totals: list[CategoryRow],
    team_by_id: dict[int, Team],
) -> Reporting:
    rows = list(
        base.order_by()
        .values("team_id", "category", "provider_name", "day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    try:
        exact = exact_amounts(rows, currency=currency)
    except FxRateMissing as exc:
        return Reporting(currency=currency, error=str(exc))
    by_team: dict[int | None, dict[str, Fraction]] = defaultdict(
        lambda: dict.fromkeys(CATEGORIES, Fraction(0))
    )
    by_provider: dict[str, Fraction] = defaultdict(Fraction)
    for row, value in zip(rows, exact, strict=True):
        by_team[row["team_id"]][row["category"]] += value
        by_provider[row["provider_name"]] += value
    overall = dict.fromkeys(CATEGORIES, Fraction(0))
    for categories in by_team.values():
        for category, value in categories.items():
            overall[category] += value
    natives: dict[int | None, list[NativeAmount]] = defaultdict(list)
    for native_row in native_rows:
        team_id = native_row.team.id if native_row.team else None
        natives[team_id].append(NativeAmount(native_row.currency, native_row.total))
    teams = [
        converted_row(cats, native=natives[team_id], team=team_by_id.get(team_id or 0))
        for team_id, cats in by_team.items()
    ]
    teams.sort(key=lambda r: (r.team is None, r.team.name if r.team else ""))
    return Reporting(
        currency=currency,
        total=converted_row(overall, native=native_amounts(native_totals)),
        teams=teams,
        providers=[
            ProviderRow(provider=p, currency=currency, amount=money_round(v))
            for p, v in sorted(by_provider.items())
        ],
    )
