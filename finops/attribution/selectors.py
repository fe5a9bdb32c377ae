"""Reads for the pages and the API: month overview, team month, run detail, reconciliation.

Every function does a fixed number of aggregate queries, whatever the number of rows.
Amounts are never added across currencies unconverted: native rows and totals are keyed by
currency; the "reporting currency" figures beside them are converted per day at the FX rates
(finops.currency.selectors: newest rate on or before the day, exact, rounded once to 12 places),
and a missing rate is shown as an error, never guessed. Reconciliation stays native.
Overview and team pages read the rollups (TeamDailyCost, RunCost); the run detail and the
reconciliation read the ledger (AllocatedCost), which is what must add up to the bill.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import FloatField, Q, QuerySet, Sum
from django.db.models.functions import Cast

from billing_ingest.models import CostLineItem, JobRecord, MonthChange
from billing_ingest.money import MoneySum
from finops.attribution.models import (
    AllocatedCost,
    AttributionRun,
    Category,
    RunCost,
    TeamDailyCost,
)
from finops.currency.selectors import Converter, FxRateMissing, converter_for, money_round
from finops.org.models import Team

CATEGORIES: list[str] = [str(c.value) for c in Category]
ZERO = Decimal(0)
SECONDS_PER_HOUR = Decimal(3600)


def _currency_order(currency: str) -> tuple[bool, str]:
    """The default currency first, then the others alphabetically."""
    return (currency != settings.FINOPS_DEFAULT_CURRENCY, currency)


def _empty_categories() -> dict[str, Decimal]:
    return dict.fromkeys(CATEGORIES, ZERO)


def _visible(qs: QuerySet, *, teams: QuerySet[Team], include_unowned: bool) -> QuerySet:
    """Rows of the given teams; rows owned by no team (platform idle, shared, unallocated)
    only when asked, because only finance may see org-wide buckets."""
    condition = Q(team__in=teams)
    if include_unowned:
        condition |= Q(team__isnull=True)
    return qs.filter(condition)


# --- months -------------------------------------------------------------------------------


def month_list_with_data() -> list[date]:
    """Billing months that have line items or attributed cost, newest first."""
    months = set(
        CostLineItem.objects.settled()
        .order_by()
        .values_list("billing_period", flat=True)
        .distinct()
    )
    months |= set(
        TeamDailyCost.objects.order_by().values_list("billing_period", flat=True).distinct()
    )
    return sorted(months, reverse=True)


# --- month overview -----------------------------------------------------------------------


@dataclass
class CategoryRow:
    """Amounts by category for one key (a team, a total) in one currency."""

    currency: str
    by_category: dict[str, Decimal] = field(default_factory=_empty_categories)
    team: Team | None = None

    @property
    def total(self) -> Decimal:
        return sum(self.by_category.values(), ZERO)

    @property
    def idle(self) -> Decimal:
        return self.by_category[Category.IDLE]

    @property
    def unallocated(self) -> Decimal:
        return self.by_category[Category.UNALLOCATED]


@dataclass
class ProviderRow:
    provider: str
    currency: str
    amount: Decimal


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
    base = _visible(
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
    providers.sort(key=lambda p: (_currency_order(p.currency), p.provider))
    # Named teams alphabetically, the unowned bucket last.
    team_rows = sorted(
        rows.values(),
        key=lambda r: (r.team is None, r.team.name if r.team else "", _currency_order(r.currency)),
    )
    native_totals = [totals[c] for c in sorted(totals, key=_currency_order)]
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


# --- team month ---------------------------------------------------------------------------


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
    native_totals = [totals[c] for c in sorted(totals, key=_currency_order)]
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


def run_cost_list_visible(*, teams: QuerySet[Team], include_unowned: bool) -> QuerySet[RunCost]:
    """Run rollups the viewer may see, ready for RunCostFilterSet (month, team, ...)."""
    # Cast: on SQLite money is stored as text, where "9" sorts above "10".
    by_cost = Cast("cost", output_field=FloatField()).desc()
    qs = RunCost.objects.select_related("team").order_by("-billing_period", by_cost, "run_id")
    return _visible(qs, teams=teams, include_unowned=include_unowned)


# --- run detail ---------------------------------------------------------------------------


@dataclass
class RunJobRow:
    job: JobRecord | None
    currency: str
    cost: Decimal
    gpu_seconds: Decimal

    @property
    def gpu_hours(self) -> Decimal:
        return self.gpu_seconds / SECONDS_PER_HOUR


@dataclass
class RunDetail:
    team: Team
    run_id: str
    month: date
    # The run's rollups: one per (cluster, currency).
    rollups: list[RunCost]
    # Ledger cost grouped by job and currency; job None is cost on the run but no job.
    jobs: list[RunJobRow]


def run_detail(*, team: Team, run_id: str, month: date) -> RunDetail | None:
    """A run's rollups and its jobs with their cost from the ledger; None when unknown."""
    rollups = list(
        RunCost.objects.filter(billing_period=month, team=team, run_id=run_id).order_by(
            "cluster", "billing_currency"
        )
    )
    grouped = list(
        AllocatedCost.objects.filter(billing_period=month, team=team, run_id=run_id)
        .order_by()
        .values("job_id", "billing_currency")
        .annotate(cost=MoneySum("amount"), gpu_seconds=Sum("gpu_seconds"))
    )
    if not rollups and not grouped:
        return None
    jobs_by_id = JobRecord.objects.in_bulk([g["job_id"] for g in grouped if g["job_id"]])
    rows = [
        RunJobRow(
            job=jobs_by_id.get(g["job_id"]) if g["job_id"] else None,
            currency=g["billing_currency"],
            cost=g["cost"],
            gpu_seconds=g["gpu_seconds"] or ZERO,
        )
        for g in grouped
    ]
    far_future = date.max
    rows.sort(
        key=lambda r: (
            r.job is None,
            (r.job.start.date() if r.job and r.job.start else far_future),
            r.job.job_id if r.job else "",
        )
    )
    return RunDetail(team=team, run_id=run_id, month=month, rollups=rollups, jobs=rows)


# --- reconciliation -----------------------------------------------------------------------


@dataclass
class ReconciliationRow:
    """Bill vs ledger for one provider x billing account x currency (or a currency total)."""

    provider: str
    billing_account_id: str
    currency: str
    # Sum of EffectiveCost (what attribution splits) and of BilledCost (cash).
    billed: Decimal = ZERO
    billed_cost: Decimal = ZERO
    attributed: dict[str, Decimal] = field(default_factory=_empty_categories)

    @property
    def attributed_total(self) -> Decimal:
        return sum(self.attributed.values(), ZERO)

    @property
    def idle(self) -> Decimal:
        return self.attributed[Category.IDLE]

    @property
    def unallocated(self) -> Decimal:
        return self.attributed[Category.UNALLOCATED]

    @property
    def difference(self) -> Decimal:
        return self.billed - self.attributed_total

    @property
    def balanced(self) -> bool:
        return self.difference == 0

    def add(self, other: ReconciliationRow) -> None:
        self.billed += other.billed
        self.billed_cost += other.billed_cost
        for category, amount in other.attributed.items():
            self.attributed[category] += amount


@dataclass
class Reconciliation:
    month: date
    # settings.FINOPS_DEFAULT_CURRENCY: the currency of `total`.
    currency: str
    # Lines in the default currency only: reports never add different currencies.
    total: ReconciliationRow
    # One total per currency present (the default one included).
    totals_by_currency: list[ReconciliationRow]
    by_account: list[ReconciliationRow]
    # For information only: the whole ledger in the reporting currency (converted per day).
    # The rows above stay native, because they must match the invoices to the cent.
    converted: Reporting | None = None
    # Why the ledger may not match the bill yet ("" when it is current): see month_staleness.
    stale_reason: str = ""

    @property
    def balanced(self) -> bool:
        return all(row.balanced for row in self.by_account)

    @property
    def stale(self) -> bool:
        return bool(self.stale_reason)


def month_staleness(*, month: date) -> str:
    """Why the month's ledger may lag its bill, or "" when it is current: an attribution is
    running or the last one failed, or line items changed (a billing batch settled) after the
    inputs of the last successful attribution were read, or the month was never attributed.
    A worker killed mid-import or mid-attribution can leave the month so; the page and the API
    say it rather than show a difference without a reason."""
    runs = AttributionRun.objects.filter(billing_period=month)
    latest = runs.order_by("-id").first()
    if latest is not None and latest.status == AttributionRun.Status.RUNNING:
        return "attribution is running"
    if latest is not None and latest.status == AttributionRun.Status.FAILED:
        return f"the last attribution failed: {latest.error}"
    succeeded = runs.filter(status=AttributionRun.Status.SUCCEEDED).order_by("-id").first()
    if succeeded is None:
        billed = CostLineItem.objects.settled().filter(billing_period=month).exists()
        return "the month's line items have not been attributed yet" if billed else ""
    as_of = succeeded.inputs_at or succeeded.started_at
    change = (
        MonthChange.objects.filter(
            month=month, kind=MonthChange.Kind.BILLING, changed_at__gte=as_of
        )
        .order_by("-changed_at")
        .first()
    )
    if change is None:
        return ""
    return (
        f"line items changed at {change.changed_at:%Y-%m-%d %H:%M:%S} UTC, after the last "
        f"attribution read them ({as_of:%Y-%m-%d %H:%M:%S} UTC); it is queued"
    )


def reconciliation_for_month(
    *, month: date, reporting_currency: str | None = None
) -> Reconciliation:
    """Billed (EffectiveCost of the month's line items of SUCCEEDED batches) vs the ledger, per
    provider x account x currency; difference = billed - every category, exactly 0 once
    attribution ran. Plus one converted grand total (the ledger in the reporting currency,
    per-day rates)."""
    rows: dict[tuple[str, str, str], ReconciliationRow] = {}

    def row_for(provider: str, account: str, currency: str) -> ReconciliationRow:
        key = (provider, account, currency)
        if key not in rows:
            rows[key] = ReconciliationRow(provider, account, currency)
        return rows[key]

    # Only rows of SUCCEEDED batches, as attribution reads: a batch still loading (or left
    # RUNNING by an interrupted import) holds rows that are not the bill.
    billed = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .order_by()
        .values("provider_name", "billing_account_id", "billing_currency")
        .annotate(effective=MoneySum("effective_cost"), cash=MoneySum("billed_cost"))
    )
    for b in billed:
        row = row_for(b["provider_name"], b["billing_account_id"], b["billing_currency"])
        row.billed += b["effective"] or ZERO
        row.billed_cost += b["cash"] or ZERO

    # By day too: the converted grand total needs each day's rate (same query, more rows).
    attributed = list(
        AllocatedCost.objects.filter(billing_period=month)
        .order_by()
        .values("provider_name", "billing_account_id", "billing_currency", "category", "day")
        .annotate(amount=MoneySum("amount"))
    )
    for a in attributed:
        row = row_for(a["provider_name"], a["billing_account_id"], a["billing_currency"])
        row.attributed[a["category"]] += a["amount"] or ZERO

    by_account = [rows[k] for k in sorted(rows)]
    per_currency: dict[str, ReconciliationRow] = {}
    for row in by_account:
        per_currency.setdefault(row.currency, ReconciliationRow("", "", row.currency)).add(row)
    currency = settings.FINOPS_DEFAULT_CURRENCY
    return Reconciliation(
        month=month,
        currency=currency,
        total=per_currency.get(currency, ReconciliationRow("", "", currency)),
        totals_by_currency=[per_currency[c] for c in sorted(per_currency, key=_currency_order)],
        by_account=by_account,
        converted=_ledger_converted(
            attributed,
            currency=reporting_currency or settings.FINOPS_REPORTING_CURRENCY,
            native={row.currency: row.attributed_total for row in per_currency.values()},
        ),
        stale_reason=month_staleness(month=month),
    )


# --- reporting currency -------------------------------------------------------------------


@dataclass
class NativeAmount:
    currency: str
    amount: Decimal


@dataclass
class ConvertedRow:
    """One key's amounts in the reporting currency, each rounded once from its exact sum (so
    `total` is not the sum of the rounded categories; they differ by 1e-12 at most)."""

    total: Decimal
    by_category: dict[str, Decimal] = field(default_factory=_empty_categories)
    # The native amounts that were converted, one per currency.
    native: list[NativeAmount] = field(default_factory=list)
    team: Team | None = None


@dataclass
class Reporting:
    """Figures converted to `currency`, or the error that stopped the conversion."""

    currency: str
    error: str = ""
    total: ConvertedRow | None = None
    teams: list[ConvertedRow] = field(default_factory=list)
    providers: list[ProviderRow] = field(default_factory=list)


def _exact_amounts(rows: list[Any], *, currency: str) -> list[Fraction]:
    """Each row's `amount` (on its `day`, in its `billing_currency`) in `currency`, exactly.

    At most two queries for the rates. Rows are converted earliest day first, so a missing
    rate is reported for the first day that lacks one (later days would lack it too).
    """
    if not rows:
        return []
    rows.sort(key=lambda r: (r["day"], r["billing_currency"]))
    converter: Converter = converter_for(
        to_currency=currency,
        currencies={r["billing_currency"] for r in rows},
        first_day=rows[0]["day"],
        last_day=rows[-1]["day"],
    )
    return [
        converter.exact(day=r["day"], currency=r["billing_currency"], amount=r["amount"])
        for r in rows
    ]


def _native(rows: Iterable[CategoryRow]) -> list[NativeAmount]:
    return [NativeAmount(r.currency, r.total) for r in rows]


def _converted_row(
    by_category: dict[str, Fraction], *, native: list[NativeAmount], team: Team | None = None
) -> ConvertedRow:
    row = ConvertedRow(total=money_round(sum(by_category.values(), Fraction(0))), team=team)
    for category, exact in by_category.items():
        row.by_category[category] = money_round(exact)
    row.native = native
    return row


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
        exact = _exact_amounts(rows, currency=currency)
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
        _converted_row(cats, native=natives[team_id], team=team_by_id.get(team_id or 0))
        for team_id, cats in by_team.items()
    ]
    teams.sort(key=lambda r: (r.team is None, r.team.name if r.team else ""))
    return Reporting(
        currency=currency,
        total=_converted_row(overall, native=_native(native_totals)),
        teams=teams,
        providers=[
            ProviderRow(provider=p, currency=currency, amount=money_round(v))
            for p, v in sorted(by_provider.items())
        ],
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
        exact = _exact_amounts(rows, currency=currency)
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
        currency=currency, total=_converted_row(by_category, native=_native(native_totals))
    )
    return reporting, daily


def _ledger_converted(rows: list[Any], *, currency: str, native: dict[str, Decimal]) -> Reporting:
    """The month's ledger rows (day, currency, amount) in one currency, for information."""
    rows = [r for r in rows if r["amount"] is not None]
    try:
        exact = _exact_amounts(rows, currency=currency)
    except FxRateMissing as exc:
        return Reporting(currency=currency, error=str(exc))
    natives = [NativeAmount(c, native[c]) for c in sorted(native, key=_currency_order)]
    total = ConvertedRow(total=money_round(sum(exact, Fraction(0))), native=natives)
    return Reporting(currency=currency, total=total)


# --- cost time series (API) ---------------------------------------------------------------

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
    base = _visible(
        TeamDailyCost.objects.filter(billing_period=month),
        teams=teams,
        include_unowned=include_unowned,
    )
    rows = list(
        base.order_by()
        .values(key_field, "team__name", "day", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    exact = _exact_amounts(rows, currency=currency)
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
        native_totals=[NativeAmount(c, native[c]) for c in sorted(native, key=_currency_order)],
        series=series,
    )
