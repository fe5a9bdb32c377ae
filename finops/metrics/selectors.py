"""The figures /metrics exposes, read from the stored rollups (no attribution, no forecast run
on a scrape): typed rows, money as the exact Decimal sums of the ledger (to its last stored
decimal, so the series of a month add up to the bill as the reconciliation does).

Scope: finance (and viewers) see every series; a team lead, or a token limited to teams, sees
the series of their teams only (no organisation-wide buckets, no invoices, no org budgets).
Pipeline freshness is the same for everyone.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db.models import Max, QuerySet

from billing_ingest.models import CostLineItem, ImportBatch
from finops.attribution.models import AttributionRun, TeamDailyCost
from finops.attribution.selectors.reconciliation import month_staleness
from finops.budgets.models import BudgetEvaluation
from finops.budgets.selectors import budget_list_visible
from finops.core.money import MoneySum
from finops.core.months import month_format
from finops.economics.selectors import energy_by_team, waste_by_cause
from finops.org.permissions import AnyUser, user_is_finance
from finops.org.selectors import team_list_visible

# The team label of rows no team owns (shared, idle without an owner, unallocated).
NO_TEAM = "none"


def exact(value: Decimal | None) -> Decimal:
    """A sum without its trailing zeros (SQLite's and PostgreSQL's sums carry the column's six
    places): 500.250000 -> 500.25."""
    return (value or Decimal(0)).normalize()


@dataclass(frozen=True, slots=True, order=True)
class CostRow:
    """Amortised cost (EffectiveCost as the ledger splits it) of one team x provider x category x
    month, in the bill's currency."""

    team: str
    provider: str
    category: str
    month: str
    currency: str
    amount: Decimal


@dataclass(frozen=True, slots=True, order=True)
class InvoicedRow:
    """Invoiced cost (BilledCost) of one provider x billing account x month: not split by team."""

    provider: str
    account: str
    month: str
    currency: str
    amount: Decimal


@dataclass(frozen=True, slots=True, order=True)
class WasteRow:
    """Waste of a team's runs in a month by cause (finops.waste: rework, restart, abandoned,
    idle_in_allocation, and cancelled apart), from the stored run economics."""

    team: str
    month: str
    currency: str
    cause: str
    amount: Decimal


@dataclass(frozen=True, slots=True, order=True)
class EnergyRow:
    """GPU and facility kWh and kg CO2e of a team's runs in a month (measured or estimated)."""

    team: str
    month: str
    gpu_kwh: Decimal
    facility_kwh: Decimal
    co2e_kg: Decimal | None


@dataclass(frozen=True, slots=True)
class BudgetRow:
    budget_id: int
    name: str
    team: str
    period: str
    period_start: str
    currency: str
    amount: Decimal
    actual: Decimal
    forecast: Decimal


@dataclass(frozen=True, slots=True)
class Freshness:
    # Seconds since the epoch (UTC) of the newest succeeded import per kind, and of the newest
    # succeeded attribution; None when there was none.
    last_import: dict[str, float]
    last_attribution: float | None
    # month -> 1 when its ledger may lag its bill (reconciliation's month_staleness), else 0.
    stale: dict[str, int]


@dataclass(frozen=True, slots=True)
class MoneyFigures:
    """The figures that change only with the data (cached by the data version: views.py)."""

    months: list[str]
    costs: list[CostRow]
    invoiced: list[InvoicedRow]
    waste: list[WasteRow]
    budgets: list[BudgetRow]
    energy: list[EnergyRow] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Metrics:
    money: MoneyFigures
    # Read at every scrape: a running or failed attribution shows at once.
    freshness: Freshness


def metric_months(*, count: int | None = None) -> list[dt.date]:
    """The newest `count` months with a ledger or a bill (FINOPS_METRICS_MONTHS, default 12):
    the rollup's months and the billing periods of the settled bill deliveries (not a scan of
    the line items)."""
    count = count or settings.FINOPS_METRICS_MONTHS
    ledger = set(TeamDailyCost.objects.values_list("billing_period", flat=True).distinct())
    deliveries = ImportBatch.objects.filter(
        kind=ImportBatch.Kind.BILLING, status=ImportBatch.Status.SUCCEEDED
    ).values_list("billing_periods", flat=True)
    delivered = {
        dt.date(int(text[:4]), int(text[5:7]), 1)
        for periods in deliveries
        for text in periods or []
        if isinstance(text, str) and len(text) >= 7
    }
    return sorted(ledger | delivered)[-count:]


def _slug(team_slug: str | None) -> str:
    return team_slug or NO_TEAM


def _cost_rows(months: list[dt.date], teams: QuerySet | None) -> list[CostRow]:
    rows = TeamDailyCost.objects.filter(billing_period__in=months)
    if teams is not None:
        rows = rows.filter(team__in=teams)
    sums = (
        rows.order_by()
        .values_list(
            "team__slug", "provider_name", "category", "billing_period", "billing_currency"
        )
        .annotate(total=MoneySum("amount"))
    )
    return sorted(
        CostRow(_slug(team), provider, category, month_format(month), currency, exact(total))
        for team, provider, category, month, currency, total in sums
    )


def _invoiced_rows(months: list[dt.date]) -> list[InvoicedRow]:
    sums = (
        CostLineItem.objects.settled()
        .filter(billing_period__in=months)
        .order_by()
        .values_list("provider_name", "billing_account_id", "billing_period", "billing_currency")
        .annotate(total=MoneySum("billed_cost"))
    )
    return sorted(
        InvoicedRow(provider, account, month_format(month), currency, exact(total))
        for provider, account, month, currency, total in sums
    )


def _waste_rows(months: list[dt.date], teams: QuerySet | None) -> list[WasteRow]:
    return sorted(
        WasteRow(_slug(w.team_slug), month_format(w.month), w.currency, w.cause, exact(w.amount))
        for w in waste_by_cause(months=months, teams=teams)
    )


def _energy_rows(months: list[dt.date], teams: QuerySet | None) -> list[EnergyRow]:
    return sorted(
        EnergyRow(_slug(e.team_slug), month_format(e.month), exact(e.gpu_kwh),
                  exact(e.facility_kwh), None if e.co2e_kg is None else exact(e.co2e_kg))
        for e in energy_by_team(months=months, teams=teams)
    )  # fmt: skip


def _budget_rows(user: AnyUser) -> list[BudgetRow]:
    """Each visible active budget's newest stored evaluation of its current kind of period."""
    budgets = {b.pk: b for b in budget_list_visible(user=user).filter(active=True)}
    evaluations = BudgetEvaluation.objects.filter(budget_id__in=budgets).order_by(
        "budget_id", "-period_start"
    )
    rows: list[BudgetRow] = []
    seen: set[int] = set()
    for evaluation in evaluations:
        budget = budgets[evaluation.budget_id]
        if evaluation.budget_id in seen or evaluation.period != budget.period:
            continue
        if evaluation.status == BudgetEvaluation.Status.ERROR:
            continue  # no figures to show (an FX rate missing): not a zero
        seen.add(evaluation.budget_id)
        rows.append(
            BudgetRow(
                budget_id=budget.pk,
                name=budget.name,
                team=_slug(budget.team.slug if budget.team else None),
                period=budget.period,
                period_start=f"{evaluation.period_start:%Y-%m-%d}",
                currency=evaluation.currency,
                amount=exact(budget.amount),
                actual=exact(evaluation.actual),
                forecast=exact(evaluation.forecast),
            )
        )
    return rows


def _epoch(moment: dt.datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None


def pipeline_freshness(*, months: list[dt.date]) -> Freshness:
    imports = (
        ImportBatch.objects.filter(status=ImportBatch.Status.SUCCEEDED)
        .order_by()
        .values_list("kind")
        .annotate(last=Max("finished_at"))
    )
    last_attribution = AttributionRun.objects.filter(
        status=AttributionRun.Status.SUCCEEDED
    ).aggregate(last=Max("finished_at"))["last"]
    return Freshness(
        last_import={kind: stamp for kind, last in imports if (stamp := _epoch(last)) is not None},
        last_attribution=_epoch(last_attribution),
        stale={month_format(m): int(bool(month_staleness(month=m))) for m in months},
    )


def money_figures_for(*, user: AnyUser, months: list[dt.date]) -> MoneyFigures:
    """Every money figure of /metrics the user may see, for `months`."""
    finance = user_is_finance(user)
    teams = None if finance else team_list_visible(user=user)
    return MoneyFigures(
        months=[month_format(m) for m in months],
        costs=_cost_rows(months, teams),
        invoiced=_invoiced_rows(months) if finance else [],
        waste=_waste_rows(months, teams),
        budgets=_budget_rows(user),
        energy=_energy_rows(months, teams),
    )


def metrics_for(*, user: AnyUser, money: MoneyFigures | None = None) -> Metrics:
    """Every figure of /metrics the user may see (`money`: the cached money figures)."""
    if money is None:
        money = money_figures_for(user=user, months=metric_months())
    exposed = [dt.date(int(m[:4]), int(m[5:7]), 1) for m in money.months]
    return Metrics(money=money, freshness=pipeline_freshness(months=exposed))
