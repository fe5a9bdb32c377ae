"""Reads: which thresholds of a budget's period are crossed and not alerted yet, and the day
each was crossed.

Actual cost: the first day of the period whose cumulative actual reached the threshold (from the
status's burn-down days, so a bill delivered late or a budget made after the fact still names
the day the money was spent). Forecast: the first day whose forecast, recomputed as of that day
from the ledger as it is now, reached it; searched only over the days no earlier evaluation
covered (the stored one, when it was below the threshold) and never after the day the actual
cost itself crossed the same level (the forecast includes the actual). A daily evaluation
therefore recomputes nothing: the search is one day, the day evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from finops.budgets.models import Budget, BudgetAlert, BudgetEvaluation
from finops.budgets.selectors import BudgetStatus, _history_first, budget_status
from finops.budgets.series import SeriesRollups

HUNDRED = Decimal(100)
ACTUAL, FORECAST = str(BudgetAlert.Kind.ACTUAL), str(BudgetAlert.Kind.FORECAST)


@dataclass(frozen=True)
class Crossing:
    """A threshold newly reached: its kind, % and money level, and the day it was reached."""

    kind: str
    threshold: int
    level: Decimal
    crossed_on: date

    @property
    def label(self) -> str:
        return f"{self.kind} {self.threshold} %"


def level_of(budget: Budget, threshold: int) -> Decimal:
    return (budget.amount * threshold / HUNDRED).quantize(Decimal("0.01"))


def _actual_crossed_on(status: BudgetStatus, level: Decimal) -> date | None:
    """The first burn-down day whose cumulative actual reached `level`, if any."""
    for point in status.days:
        if point.day > status.as_of:
            break
        if point.actual is not None and point.actual >= level:
            return point.day
    return None


def _forecast_search_start(
    status: BudgetStatus, level: Decimal, previous: BudgetEvaluation | None
) -> date:
    """The first day not known to be below `level`: the day after the stored evaluation of this
    period when its forecast was below the level, else the period's start."""
    if (
        previous is not None
        and not previous.error
        and previous.period_start == status.period.start
        and previous.as_of < status.as_of
        and previous.forecast < level
    ):
        return previous.as_of + timedelta(days=1)
    return status.period.start


def _forecast_crossed_on(
    status: BudgetStatus, level: Decimal, start: date, end: date, rollups: SeriesRollups
) -> date:
    """The first day of start..end-1 whose forecast reached `level`; `end` when none did."""
    day = start
    while day < end:
        if budget_status(budget=status.budget, as_of=day, rollups=rollups).forecast >= level:
            return day
        day += timedelta(days=1)
    return end


def crossings_due(
    *,
    status: BudgetStatus,
    alerted: set[tuple[str, int]],
    previous: BudgetEvaluation | None,
) -> list[Crossing]:
    """The thresholds reached as of status.as_of and not in `alerted` ((kind, threshold) of the
    period's alerts), with the day each was crossed; actual first, then forecast, ascending."""
    budget = status.budget
    out: list[Crossing] = []
    for threshold in sorted({int(t) for t in budget.thresholds}):
        level = level_of(budget, threshold)
        if status.actual < level:
            continue
        day = _actual_crossed_on(status, level) or status.as_of
        if (ACTUAL, threshold) not in alerted:
            out.append(Crossing(ACTUAL, threshold, level, day))
    rollups: SeriesRollups | None = None
    for threshold in sorted({int(t) for t in budget.forecast_thresholds}):
        level = level_of(budget, threshold)
        if status.forecast < level or (FORECAST, threshold) in alerted:
            continue
        reached = _actual_crossed_on(status, level) if status.actual >= level else None
        end = min(status.as_of, reached or status.as_of)
        start = _forecast_search_start(status, level, previous)
        if start < end:
            if rollups is None:
                first = min(status.period.start, _history_first(start))
                rollups = SeriesRollups.load(budgets=[budget], first=first, last=status.period.end)
            end = _forecast_crossed_on(status, level, start, end, rollups)
        out.append(Crossing(FORECAST, threshold, level, end))
    return out
