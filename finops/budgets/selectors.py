"""Reads: which budgets a user sees, a budget's status on a day (actual, forecast and band,
% used, the burn-down series), the biggest drivers of its period, and its alert history."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction

from django.conf import settings
from django.db.models import F, QuerySet
from django.utils import timezone

from finops.attribution.models import TeamDailyCost
from finops.budgets.forecast import WINDOW_DAYS, Forecast, ForecastInput, forecast_rest
from finops.budgets.models import Budget, BudgetAlert, BudgetEvaluation
from finops.budgets.periods import Period, period_containing
from finops.budgets.series import ScopeSeries, SeriesRollups, scope_series
from finops.core.months import month_add
from finops.currency.selectors import FxRateMissing, money_round
from finops.org.models import Team
from finops.org.permissions import AnyUser, user_is_finance
from finops.org.selectors import team_list_visible

ZERO = Decimal(0)
HUNDRED = Decimal(100)


def budget_list_visible(*, user: AnyUser) -> QuerySet[Budget]:
    """Every budget for finance; a team lead's teams' budgets (never org or provider ones)."""
    qs = Budget.objects.select_related("team", "owner")
    if user_is_finance(user):
        return qs
    return qs.filter(team__in=team_list_visible(user=user))


def bill_lag_days(provider: str) -> int:
    lags = settings.FINOPS_BILL_LAG_DAYS
    return int(lags.get(provider, lags.get("*", 1)))


def budget_period(*, budget: Budget, day: date) -> Period:
    return period_containing(
        kind=budget.period, day=day, fiscal_year_start_month=settings.FINOPS_FISCAL_YEAR_START_MONTH
    )


def budget_ids_touching_month(*, month: date, as_of: date) -> list[int]:
    """The active budgets whose period containing as_of overlaps the month (first day)."""
    last = month_add(month, 1)
    ids: list[int] = []
    for budget in Budget.objects.filter(active=True):
        period: Period = budget_period(budget=budget, day=as_of)
        if period.overlaps(month, last):
            ids.append(budget.pk)
    return ids


@dataclass
class BurnDay:
    """One day of the burn-down chart, cumulative since the period start, budget currency."""

    day: date
    actual: Decimal | None
    forecast: Decimal | None
    low: Decimal | None
    high: Decimal | None


@dataclass
class BudgetStatus:
    budget: Budget
    period: Period
    as_of: date
    currency: str
    actual: Decimal = ZERO
    forecast: Decimal = ZERO
    forecast_low: Decimal = ZERO
    forecast_high: Decimal = ZERO
    method: str = ""
    error: str = ""
    days: list[BurnDay] = field(default_factory=list)

    @property
    def percent_used(self) -> Decimal:
        return (self.actual * HUNDRED / self.budget.amount).quantize(Decimal("0.01"))

    @property
    def forecast_percent(self) -> Decimal:
        return (self.forecast * HUNDRED / self.budget.amount).quantize(Decimal("0.01"))

    @property
    def over(self) -> bool:
        return self.actual >= self.budget.amount

    @property
    def forecast_over(self) -> bool:
        return self.forecast >= self.budget.amount

    @property
    def bar_percent(self) -> Decimal:
        """% used for a bar, capped at 100."""
        return min(self.percent_used, HUNDRED).quantize(Decimal("0.1"))


def _projected_recurring(series: ScopeSeries, provider: str, period: Period, as_of: date) -> dict:
    """Recurring charges after as_of: the known ones, and for months of the period after the
    newest month holding any, that month's charges again on the same days of the month."""
    known = series.recurring.get(provider, {})
    out: dict[date, Fraction] = {d: v for d, v in known.items() if as_of < d <= period.end}
    if not known:
        return out
    newest = max(known).replace(day=1)
    template = {d.day: v for d, v in known.items() if d.replace(day=1) == newest}
    month = month_add(newest, 1)
    while month <= period.end:
        last = month_add(month, 1) - timedelta(days=1)
        for dom, value in template.items():
            day = month.replace(day=min(dom, last.day))
            if as_of < day <= period.end:
                out[day] = out.get(day, Fraction(0)) + value
        month = month_add(month, 1)
    return out


def _provider_forecast(
    series: ScopeSeries, provider: str, period: Period, as_of: date, history_first: date
) -> Forecast:
    total = series.total.get(provider, {})
    recurring = series.recurring.get(provider, {})
    complete = as_of - timedelta(days=bill_lag_days(provider))
    # History starts at the provider's first day with cost (not zeros before it ever existed).
    days_with_cost = [d for d in total if d >= history_first]
    first = min(days_with_cost) if days_with_cost else complete + timedelta(days=1)
    history = []
    day = max(first, complete - timedelta(days=WINDOW_DAYS - 1))
    while day <= complete:
        history.append(_dec(total.get(day, Fraction(0)) - recurring.get(day, Fraction(0))))
        day += timedelta(days=1)
    lag = {
        d: _dec(total.get(d, Fraction(0)) - recurring.get(d, Fraction(0)))
        for d in (complete + timedelta(days=i + 1) for i in range((as_of - complete).days))
    }
    return forecast_rest(
        ForecastInput(
            history=history,
            complete_through=complete,
            as_of=as_of,
            period_end=period.end,
            lag_actuals=lag,
            recurring={
                d: _dec(v) for d, v in _projected_recurring(series, provider, period, as_of).items()
            },
        )
    )


def _dec(value: Fraction) -> Decimal:
    return money_round(value)


def _history_first(as_of: date) -> date:
    max_lag = max([bill_lag_days(p) for p in settings.FINOPS_BILL_LAG_DAYS] + [1])
    return as_of - timedelta(days=WINDOW_DAYS + max_lag)


def budget_statuses(*, budgets: Sequence[Budget], as_of: date) -> list[BudgetStatus]:
    """budget_status of each budget, in order, from one read of the rollups they need (the
    budgets list): the number of queries does not grow with the number of budgets."""
    if not budgets:
        return []
    periods = [budget_period(budget=b, day=as_of) for b in budgets]
    first = min(min(p.start for p in periods), _history_first(as_of))
    last = max(p.end for p in periods)
    rollups = SeriesRollups.load(budgets=budgets, first=first, last=last)
    return [budget_status(budget=b, as_of=as_of, rollups=rollups) for b in budgets]


def budget_status(
    *, budget: Budget, as_of: date, rollups: SeriesRollups | None = None
) -> BudgetStatus:
    """Actual and forecast of the period containing as_of, using ledger days <= as_of (from
    `rollups` when given: loaded by budget_statuses over every budget's days)."""
    period = budget_period(budget=budget, day=as_of)
    status = BudgetStatus(budget=budget, period=period, as_of=as_of, currency=budget.currency)
    history_first = _history_first(as_of)
    first = min(period.start, history_first)
    try:
        series = scope_series(
            budget=budget, first=first, last=period.end, currency=budget.currency, rollups=rollups
        )
    except FxRateMissing as exc:
        status.error = str(exc)
        return status
    actual_by_day: dict[date, Fraction] = defaultdict(Fraction)
    for daily in series.total.values():
        for day, value in daily.items():
            if period.start <= day <= as_of:
                actual_by_day[day] += value
    status.actual = money_round(sum(actual_by_day.values(), Fraction(0)))
    forecasts = [
        _provider_forecast(series, p, period, as_of, history_first) for p in series.providers()
    ]
    status.forecast = status.actual + sum((f.expected for f in forecasts), ZERO)
    status.forecast_low = status.actual + sum((f.low for f in forecasts), ZERO)
    status.forecast_high = status.actual + sum((f.high for f in forecasts), ZERO)
    cent = Decimal("0.01")
    status.forecast = status.forecast.quantize(cent)
    status.forecast_low = status.forecast_low.quantize(cent)
    status.forecast_high = status.forecast_high.quantize(cent)
    status.method = ", ".join(sorted({f.method for f in forecasts})) or "none"
    status.days = _burn_days(period, as_of, actual_by_day, forecasts, status)
    return status


def _burn_days(
    period: Period,
    as_of: date,
    actual_by_day: dict[date, Fraction],
    forecasts: list[Forecast],
    status: BudgetStatus,
) -> list[BurnDay]:
    out = []
    cumulative = Fraction(0)
    # The lag-day top-ups land on as_of, where the forecast line starts.
    running = status.forecast - sum((sum(f.daily.values(), ZERO) for f in forecasts), ZERO)
    day = period.start
    while day <= period.end:
        if day <= as_of:
            cumulative += actual_by_day.get(day, Fraction(0))
            actual = money_round(cumulative).quantize(Decimal("0.01"))
            point = BurnDay(day, actual, None, None, None)
            if day == as_of:
                point.forecast = point.low = point.high = running.quantize(Decimal("0.01"))
            out.append(point)
        else:
            running += sum((f.daily.get(day, ZERO) for f in forecasts), ZERO)
            half = sum((f.spread.get(day, ZERO) for f in forecasts), ZERO)
            out.append(
                BurnDay(
                    day,
                    None,
                    running.quantize(Decimal("0.01")),
                    max(running - half, ZERO).quantize(Decimal("0.01")),
                    (running + half).quantize(Decimal("0.01")),
                )
            )
        day += timedelta(days=1)
    return out


def budget_alerts_of_period(*, budget: Budget, period_start: date) -> list[BudgetAlert]:
    return list(
        BudgetAlert.objects.filter(budget=budget, period_start=period_start)
        .select_related("notification")
        .order_by("kind", "threshold")
    )


def budget_alerts_of_periods(*, statuses: Sequence[BudgetStatus]) -> dict[int, list[BudgetAlert]]:
    """Per budget id, the alerts of the status's period (budget_alerts_of_period of each), in
    one query."""
    wanted = {(s.budget.pk, s.period.start) for s in statuses}
    out: dict[int, list[BudgetAlert]] = {pk: [] for pk, _ in wanted}
    if not wanted:
        return out
    rows = (
        BudgetAlert.objects.filter(
            budget_id__in={pk for pk, _ in wanted},
            period_start__in={start for _, start in wanted},
        )
        .select_related("notification")
        .order_by("kind", "threshold")
    )
    for alert in rows:
        if (alert.budget_id, alert.period_start) in wanted:
            out[alert.budget_id].append(alert)
    return out


def budget_alert_history(*, budget: Budget) -> list[BudgetAlert]:
    return list(
        BudgetAlert.objects.filter(budget=budget)
        .select_related("notification")
        .order_by("-period_start", "kind", "threshold")
    )


def last_ledger_day_of_scope(*, budget: Budget) -> date | None:
    """The newest ledger day of the budget's team or provider (any, for other scopes)."""
    qs = TeamDailyCost.objects.all()
    if budget.team_id:
        qs = qs.filter(team_id=budget.team_id)
    elif budget.provider_name:
        qs = qs.filter(provider_name=budget.provider_name)
    return qs.order_by("-day").values_list("day", flat=True).first()


def _month_as_of(month: date) -> date:
    """The day a month's budgets are shown as of: its newest ledger day, else its last day (or
    today, when that is earlier)."""
    last = month_add(month.replace(day=1), 1) - timedelta(days=1)
    newest = (
        TeamDailyCost.objects.filter(billing_period=month.replace(day=1), day__lte=last)
        .order_by("-day")
        .values_list("day", flat=True)
        .first()
    )
    return newest or min(last, timezone.now().date())


def _stored_status(row: BudgetEvaluation) -> BudgetStatus:
    """A stored evaluation in the shape the pages render (no burn-down days)."""
    return BudgetStatus(
        budget=row.budget,
        period=Period(start=row.period_start, end=row.period_end),
        as_of=row.as_of,
        currency=row.currency,
        actual=row.actual,
        forecast=row.forecast,
        forecast_low=row.forecast_low,
        forecast_high=row.forecast_high,
        method=row.method,
        error=row.error,
    )


def _stored_evaluations(*, budgets: QuerySet[Budget], month: date) -> QuerySet[BudgetEvaluation]:
    """Each active budget's stored evaluation of its period that contains the day the month's
    budgets are shown as of (of the budget's current period kind). One query, whatever the
    number of budgets."""
    as_of = _month_as_of(month)
    return (
        BudgetEvaluation.objects.filter(
            budget__in=budgets.filter(active=True),
            period=F("budget__period"),
            period_start__lte=as_of,
            period_end__gte=as_of,
        )
        .select_related("budget", "budget__team")
        .order_by("budget__name", "budget_id")
    )


@dataclass
class TeamBudgets:
    statuses: list[BudgetStatus]
    # Active budgets without a stored evaluation of the month's period yet.
    pending: list[Budget]


def budget_statuses_of_team(*, team: Team, month: date) -> TeamBudgets:
    """The team's active budgets as of the month's newest ledger day (else its last day, or
    today when that is earlier), read from the stored evaluations (the pipeline's budgets step,
    check_budgets, a budget's save): what the team page shows beside the month."""
    budgets = list(Budget.objects.filter(team=team, active=True).select_related("team"))
    if not budgets:
        return TeamBudgets(statuses=[], pending=[])
    ids = Budget.objects.filter(pk__in=[b.pk for b in budgets])
    rows = list(_stored_evaluations(budgets=ids, month=month))
    evaluated = {row.budget_id for row in rows}
    pending = [b for b in budgets if b.pk not in evaluated]
    return TeamBudgets(statuses=[_stored_status(row) for row in rows], pending=pending)


def budgets_at_risk(*, user: AnyUser, month: date) -> list[BudgetStatus]:
    """The user's active budgets that are over, or forecast to go over, as of the month's newest
    ledger day (the overview's "budgets at risk"), the furthest over first. Read from the stored
    evaluations: a constant number of queries, whatever the number of budgets."""
    # Compared in Python with the budget's amount now rather than filtered on the stored status
    # in SQL: an amount edited since (in the admin, say) changes the answer without a new
    # forecast, and SQLite holds money as text, which SQL would compare as text.
    rows = _stored_evaluations(budgets=budget_list_visible(user=user), month=month).filter(error="")
    statuses = [_stored_status(row) for row in rows]
    risky = [s for s in statuses if s.over or s.forecast_over]
    return sorted(risky, key=lambda s: (-s.forecast_percent, s.budget.name))
