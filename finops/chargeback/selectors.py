"""Reads: a team's chargeback statement for a month (the periods finance closes are read in
period_selectors).

A statement is built from one of two places, never both:
- an open month: the live ledger (AllocatedCost) of the team and month, plus the adjustments
  pending for the closed months just before it (what the live ledger of a closed month says
  beyond its frozen statement and the adjustments already booked for it);
- a closed month: the StatementLine rows frozen when it was closed.

Native amounts are exact sums of the ledger. Reporting-currency amounts are converted per day
at the FX rates (finops.currency.selectors), exactly, and each line is rounded once to the
ledger's 12 places; a statement's reporting totals are the sums of its rounded lines, so the
lines a reader sees add up to the totals they see.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import Case, DateField, F, OuterRef, QuerySet, Subquery, Value, When

from billing_ingest.models import JobRecord
from finops.attribution.models import AllocatedCost, Category
from finops.attribution.selectors.reporting import currency_order
from finops.chargeback.adjustment_reasons import adjustment_reason
from finops.chargeback.economics import TeamMonthEconomics, teams_month_economics
from finops.chargeback.models import ClosedPeriod, Section, StatementEconomics, StatementLine
from finops.chargeback.period_selectors import closes_active
from finops.core.money import EXACT, MoneySum, exact_sum
from finops.core.months import month_previous
from finops.currency.selectors import FxRateMissing, converter_for, money_round
from finops.org.models import Team

ZERO = Decimal(0)
CATEGORY_ORDER = [str(c.value) for c in Category]
SHARE_CATEGORIES = (Category.SHARED.value, Category.IDLE.value)
# Runs listed one by one on the page and in the PDF (the largest); the others are one line per
# currency there, and every run is in the CSV. A team runs up to ~1,900 runs a month: a PDF of
# them all takes WeasyPrint about 40 s on a busy 2-core machine, for 40 pages nobody reads.
RUNS_SHOWN = 100


@dataclass
class Line:
    section: str
    key: str
    currency: str
    amount: Decimal
    # In the statement's reporting currency; None when a rate is missing.
    reporting_amount: Decimal | None
    gpu_seconds: Decimal = ZERO
    origin_month: date | None = None
    reason: str = ""

    @property
    def gpu_hours(self) -> Decimal:
        return self.gpu_seconds / Decimal(3600)


@dataclass
class Share:
    """The team's part of the organisation's shared or idle cost in one currency."""

    category: str
    currency: str
    team_amount: Decimal
    org_amount: Decimal

    @property
    def fraction(self) -> Decimal | None:
        return self.team_amount / self.org_amount if self.org_amount else None


@dataclass
class NativeTotal:
    currency: str
    amount: Decimal


@dataclass
class Statement:
    team: Team
    month: date
    currency: str
    # The close it was frozen by; None while the month is open.
    close: ClosedPeriod | None = None
    categories: list[Line] = field(default_factory=list)
    runs: list[Line] = field(default_factory=list)
    endpoints: list[Line] = field(default_factory=list)
    adjustments: list[Line] = field(default_factory=list)
    org: list[Line] = field(default_factory=list)
    fx_error: str = ""
    # What the team's runs bought, wasted and burned (statements_build(economics=True)); None
    # when not read, or for a month closed before these figures were frozen.
    economics: TeamMonthEconomics | None = None

    @property
    def runs_shown(self) -> list[Line]:
        return self.runs[:RUNS_SHOWN]

    @property
    def runs_others(self) -> list[Line]:
        """The runs beyond RUNS_SHOWN summed per currency (key: how many runs)."""
        rest = self.runs[RUNS_SHOWN:]
        lines = []
        for total in self._natives(rest):
            mine = [line for line in rest if line.currency == total.currency]
            lines.append(
                Line(Section.RUN, f"{len(mine):,} other runs", total.currency, total.amount,
                     self._reporting(mine), sum((ln.gpu_seconds for ln in mine), ZERO))
            )  # fmt: skip
        return lines

    @property
    def status(self) -> str:
        return "closed" if self.close is not None else "open"

    @property
    def is_empty(self) -> bool:
        return not (self.categories or self.adjustments)

    def _natives(self, lines: Iterable[Line]) -> list[NativeTotal]:
        sums: dict[str, Decimal] = defaultdict(Decimal)
        for line in lines:
            sums[line.currency] += line.amount
        return [NativeTotal(c, sums[c]) for c in sorted(sums, key=currency_order)]

    @staticmethod
    def _reporting(lines: list[Line]) -> Decimal | None:
        if any(line.reporting_amount is None for line in lines):
            return None
        return sum((line.reporting_amount or ZERO for line in lines), ZERO)

    @property
    def ledger_native(self) -> list[NativeTotal]:
        """The month's ledger for the team, per currency (every category)."""
        return self._natives(self.categories)

    @property
    def adjustments_native(self) -> list[NativeTotal]:
        return self._natives(self.adjustments)

    @property
    def total_native(self) -> list[NativeTotal]:
        """What the team is charged: the month's ledger plus the adjustments."""
        return self._natives([*self.categories, *self.adjustments])

    @property
    def ledger_reporting(self) -> Decimal | None:
        return self._reporting(self.categories)

    @property
    def adjustments_reporting(self) -> Decimal | None:
        return self._reporting(self.adjustments)

    @property
    def total_reporting(self) -> Decimal | None:
        return self._reporting([*self.categories, *self.adjustments])

    @property
    def shares(self) -> list[Share]:
        team = {(line.key, line.currency): line.amount for line in self.categories}
        return [
            Share(line.key, line.currency, team.get((line.key, line.currency), ZERO), line.amount)
            for line in self.org
            if line.key in SHARE_CATEGORIES
        ]


def _line_order(line: Line) -> tuple[object, ...]:
    if line.section in (Section.CATEGORY, Section.ORG):
        rank = CATEGORY_ORDER.index(line.key) if line.key in CATEGORY_ORDER else len(CATEGORY_ORDER)
        return (rank, currency_order(line.currency))
    if line.section == Section.ADJUSTMENT:
        return (line.origin_month, CATEGORY_ORDER.index(line.key), currency_order(line.currency))
    # Runs and endpoints: the largest first.
    return (-line.amount, line.key, currency_order(line.currency))


# --- the live ledger ----------------------------------------------------------------------

_Key = tuple[int, str, str, str]  # team id, section, key, currency


class _Accumulator:
    """Lines' sums: native amounts, GPU-seconds and the exact reporting amounts, the converted
    parts as Fractions and the parts already in the reporting currency as Decimals (exact in
    a 60-digit context: no Fraction per row or line where no rate is applied)."""

    def __init__(self) -> None:
        self.amount: dict[_Key, Decimal] = defaultdict(Decimal)
        self.exact: dict[_Key, Fraction] = {}
        self.same: dict[_Key, Decimal] = {}
        self.gpu: dict[_Key, Decimal] = defaultdict(Decimal)

    def add(
        self, key: _Key, amount: Decimal, exact: Fraction | Decimal | None, gpu: Decimal
    ) -> None:
        self.amount[key] += amount
        if isinstance(exact, Decimal):
            self.same[key] = EXACT.add(self.same.get(key, ZERO), exact)
        elif exact is not None:
            self.exact[key] = self.exact.get(key, Fraction(0)) + exact
        self.gpu[key] += gpu

    def reporting(self, key: _Key) -> Decimal:
        same = self.same.get(key, ZERO)
        if key not in self.exact:
            return money_round(same)
        return money_round(self.exact[key] + Fraction(same) if same else self.exact[key])

    def lines(self, *, converted: bool) -> dict[int, list[Line]]:
        by_team: dict[int, list[Line]] = defaultdict(list)
        for key, amount in self.amount.items():
            team_id, section, name, currency = key
            reporting = self.reporting(key) if converted else None
            by_team[team_id].append(Line(section, name, currency, amount, reporting, self.gpu[key]))
        return by_team


def _ledger_lines(
    *, month: date, team_ids: list[int] | None, currency: str, detail: bool
) -> tuple[dict[int, list[Line]], str]:
    """The teams' ledger of the month as statement lines (categories; with detail also runs
    and endpoints), and the FX error if a rate is missing. One ledger query, one for rates."""
    ledger = AllocatedCost.objects.filter(billing_period=month, team__isnull=False)
    if team_ids is not None:
        ledger = ledger.filter(team_id__in=team_ids)
    # Per day only the rows a rate converts: rows already in `currency` are summed per key in
    # the database (their exact value is the amount itself), so a team's month is one row per
    # run, not per run and day (issue 29: thousands of Fractions per statement at demo scale).
    rate_day = Case(
        When(billing_currency=currency, then=Value(None)),
        default=F("day"),
        output_field=DateField(),
    )
    dims = ["team_id", "category", "rate_day", "billing_currency"]
    annotations: dict[str, Case | Subquery] = {"rate_day": rate_day}
    if detail:
        # The job's endpoint looked up per ledger row (its primary key), not joined: the join
        # hashed every job of every month first (issue 29, h-pages: 62 -> 22 ms of the
        # language team's month on PostgreSQL).
        annotations["endpoint"] = Subquery(
            JobRecord.objects.filter(pk=OuterRef("job_id")).values("endpoint")[:1]
        )
        dims += ["run_id", "endpoint"]
    rows = list(
        ledger.order_by()
        .annotate(**annotations)
        .values(*dims)
        .annotate(amount=MoneySum("amount"), gpu=exact_sum("gpu_seconds", decimal_places=6))
    )
    # A row in `currency` is its own exact reporting amount.
    exact: list[Fraction | Decimal | None] = [
        r["amount"] if r["rate_day"] is None else None for r in rows
    ]
    error = ""
    converted = [i for i, r in enumerate(rows) if r["rate_day"] is not None]
    if converted:
        days = {i: rows[i]["rate_day"] for i in converted}
        converter = converter_for(
            to_currency=currency,
            currencies={rows[i]["billing_currency"] for i in converted},
            first_day=min(days.values()),
            last_day=max(days.values()),
        )
        try:
            # Earliest day first, so a missing rate is reported for the first day lacking one.
            for i in sorted(converted, key=lambda i: (days[i], rows[i]["billing_currency"])):
                row = rows[i]
                exact[i] = converter.exact(
                    day=row["rate_day"], currency=row["billing_currency"], amount=row["amount"]
                )
        except FxRateMissing as exc:
            error = str(exc)
    acc = _Accumulator()
    for row, value in zip(rows, exact, strict=True):
        team_id, cur = row["team_id"], row["billing_currency"]
        amount, gpu = row["amount"] or ZERO, Decimal(row["gpu"] or 0)
        acc.add((team_id, Section.CATEGORY, row["category"], cur), amount, value, gpu)
        if not detail:
            continue
        if row["endpoint"]:
            acc.add((team_id, Section.ENDPOINT, row["endpoint"], cur), amount, value, gpu)
        elif row["run_id"]:
            acc.add((team_id, Section.RUN, row["run_id"], cur), amount, value, gpu)
    return acc.lines(converted=not error), error


def _org_lines(month: date) -> list[Line]:
    """The organisation's shared and idle cost of the month per currency (any owner)."""
    rows = (
        AllocatedCost.objects.filter(billing_period=month, category__in=SHARE_CATEGORIES)
        .order_by()
        .values("category", "billing_currency")
        .annotate(amount=MoneySum("amount"))
    )
    return [
        Line(Section.ORG, r["category"], r["billing_currency"], r["amount"] or ZERO, None)
        for r in rows
    ]


# --- adjustments --------------------------------------------------------------------------


def _closed_runs_before(month: date, closes: dict[date, ClosedPeriod]) -> list[date]:
    """The closed months directly before `month` (no open month between), newest first: the
    months whose pending adjustments land in `month`."""
    origins = []
    current = month_previous(month)
    while current in closes:
        origins.append(current)
        current = month_previous(current)
    return origins


def _pending_adjustments(
    *, month: date, team_ids: list[int] | None, currency: str, closes: dict[date, ClosedPeriod]
) -> tuple[dict[int, list[Line]], str]:
    """Adjustment lines landing in the open `month`, per team: for each closed month C just
    before it, live ledger(C) - frozen statement(C) - adjustments for C already booked in the
    closed months after C, per category and currency."""
    result: dict[int, list[Line]] = defaultdict(list)
    errors = []
    origins = _closed_runs_before(month, closes)
    for origin in origins:
        close = closes[origin]
        live, error = _ledger_lines(
            month=origin, team_ids=team_ids, currency=currency, detail=False
        )
        if error:
            errors.append(error)
        balance: dict[tuple[int, str, str], list[Decimal | None]] = defaultdict(
            lambda: [ZERO, ZERO]
        )
        for team_id, lines in live.items():
            for line in lines:
                balance[(team_id, line.key, line.currency)] = [line.amount, line.reporting_amount]
        later = [closes[m] for m in origins if m > origin]
        booked = StatementLine.objects.filter(closed_period=close, section=Section.CATEGORY)
        booked = booked | StatementLine.objects.filter(
            closed_period__in=[c.pk for c in later],
            section=Section.ADJUSTMENT,
            origin_month=origin,
        )
        if team_ids is not None:
            booked = booked.filter(team_id__in=team_ids)
        same_currency = close.currency == currency
        for row in booked.values_list("team_id", "key", "currency", "amount", "reporting_amount"):
            team_id, key, cur, amount, reporting = row
            entry = balance[(team_id, key, cur)]
            entry[0] = (entry[0] or ZERO) - amount
            entry[1] = (
                entry[1] - reporting
                if entry[1] is not None and reporting is not None and same_currency
                else None
            )
        reason = ""
        for (team_id, key, cur), (amount, reporting) in balance.items():
            if error:
                reporting = None
            if not amount:
                continue
            reason = reason or adjustment_reason(close=close, later=later)
            result[team_id].append(
                Line(Section.ADJUSTMENT, key, cur, amount or ZERO, reporting, ZERO, origin, reason)
            )
    return result, "; ".join(errors)


# --- statements ---------------------------------------------------------------------------


def _frozen(close: ClosedPeriod, team_ids: list[int] | None) -> dict[int, list[Line]]:
    lines = StatementLine.objects.filter(closed_period=close).order_by()
    if team_ids is not None:
        lines = lines.filter(team_id__in=team_ids)
    result: dict[int, list[Line]] = defaultdict(list)
    for s in lines:
        result[s.team_id].append(
            Line(s.section, s.key, s.currency, s.amount, s.reporting_amount, s.gpu_seconds,
                 s.origin_month, s.reason)
        )  # fmt: skip
    return result


def _economics(
    *, month: date, close: ClosedPeriod | None, team_ids: list[int]
) -> dict[int, TeamMonthEconomics]:
    """The economics of the teams: frozen with a closed month, else read now."""
    if close is None:
        return teams_month_economics(month=month, team_ids=team_ids)
    rows = StatementEconomics.objects.filter(closed_period=close, team_id__in=team_ids)
    return {
        row.team_id: TeamMonthEconomics.from_json(row.body, month=month) for row in rows.order_by()
    }


def statements_build(
    *,
    month: date,
    teams: QuerySet[Team] | None = None,
    live: bool = False,
    economics: bool = False,
) -> list[Statement]:
    """Statements of the month for `teams` (default: every team) that have any figure, by team
    name. A closed month is read from its frozen lines unless `live` (what closing it would
    freeze now). A fixed number of queries, whatever the number of teams and lines; with
    `economics`, what the runs bought, wasted and burned too (chargeback.economics: a fixed
    number of queries per 500 runs)."""
    month = month.replace(day=1)
    closes = closes_active()
    close = None if live else closes.get(month)
    team_ids = list(teams.values_list("id", flat=True)) if teams is not None else None
    by_team: dict[int, list[Line]]
    fx_error = ""
    if close is not None:
        currency = close.currency
        by_team = _frozen(close, team_ids)
        fx_error = (
            "a rate was missing at the close"
            if any(ln.reporting_amount is None for lines in by_team.values() for ln in lines
                   if ln.section != Section.ORG)
            else ""
        )  # fmt: skip
    else:
        currency = settings.FINOPS_REPORTING_CURRENCY
        by_team, fx_error = _ledger_lines(
            month=month, team_ids=team_ids, currency=currency, detail=True
        )
        adjustments, adj_error = _pending_adjustments(
            month=month, team_ids=team_ids, currency=currency, closes=closes
        )
        fx_error = "; ".join(e for e in (fx_error, adj_error) if e)
        for team_id, lines in adjustments.items():
            by_team.setdefault(team_id, []).extend(lines)
        org = _org_lines(month) if by_team else []
        for lines in by_team.values():
            lines.extend(Line(o.section, o.key, o.currency, o.amount, None) for o in org)
    team_by_id = Team.objects.in_bulk(list(by_team))
    figures = _economics(month=month, close=close, team_ids=list(by_team)) if economics else {}
    statements = []
    for team_id, lines in by_team.items():
        statement = Statement(
            team=team_by_id[team_id], month=month, currency=currency, close=close,
            fx_error=fx_error, economics=figures.get(team_id),
        )  # fmt: skip
        for line in sorted(lines, key=lambda ln: (ln.section, _line_order(ln))):
            {
                Section.CATEGORY: statement.categories,
                Section.RUN: statement.runs,
                Section.ENDPOINT: statement.endpoints,
                Section.ADJUSTMENT: statement.adjustments,
                Section.ORG: statement.org,
            }[Section(line.section)].append(line)
        if not statement.is_empty:
            statements.append(statement)
    statements.sort(key=lambda s: (s.team.name, s.team.slug))
    return statements


def statement_get(*, team: Team, month: date) -> Statement:
    """The team's statement of the month (empty when it has no figure)."""
    found = statements_build(month=month, teams=Team.objects.filter(pk=team.pk), economics=True)
    if found:
        return found[0]
    month = month.replace(day=1)
    close = closes_active().get(month)
    currency = close.currency if close else settings.FINOPS_REPORTING_CURRENCY
    return Statement(team=team, month=month, currency=currency, close=close)


def team_lead_emails(*, team: Team) -> list[str]:
    """Addresses of the team's active leads that have one."""
    return sorted(
        set(
            team.leads.filter(role="team_lead", user__is_active=True)
            .exclude(user__email="")
            .values_list("user__email", flat=True)
        )
    )
