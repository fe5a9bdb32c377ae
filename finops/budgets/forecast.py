"""The forecast of a budget period's end: pure Python, no ORM, Decimal in and out.

forecast = actual to date + expected spend for the rest of the period, where

- usage (everything but recurring charges) is expected from the trailing history of complete
  days (at most WINDOW_DAYS): with 14 days or more, a level plus day-of-week offsets (additive,
  estimated over whole weeks); before that, the run-rate (the mean day). A linear trend is
  added only when it is significant (|t| > TREND_T over the window), so a flat but noisy series
  is not extrapolated along its noise, and a growing one is not forecast flat.
- recurring charges (monthly fees, support) are not extrapolated: the caller passes each one
  on its day (known, or projected from the last month for later months of a quarter or year).
- bill lag: days after `complete_through` (the provider has not delivered them in full yet) are
  forecast like future days; what the ledger already holds for them counts, never less.
- the band (p10..p90) is normal around the expected sum, from the residual spread of the fit:
  variance = m x sigma^2 (day-to-day noise) + (m x se_level)^2 (the level is an estimate).

Pure so that bench/forecast.py can backtest exactly what the budgets use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

# Candidate trailing windows: the one that forecast the last HOLDOUT_DAYS of the history best
# (from the days before them) is used. A long window averages noise away; a short one follows a
# change of level (a new workload, a month generated afresh) sooner.
WINDOWS = (28, 56)
WINDOW_DAYS = max(WINDOWS)
HOLDOUT_DAYS = 7
SEASONAL_MIN_DAYS = 14
TREND_MIN_DAYS = 7
TREND_T = Decimal(3)
# z of the 90th percentile of the standard normal: p10 = mean - Z90 sigma, p90 = mean + Z90 sigma.
Z90 = Decimal("1.2815515655")
ZERO = Decimal(0)
ONE = Decimal(1)


@dataclass(frozen=True)
class ForecastInput:
    """One series (one provider of a budget's scope), all amounts in the budget's currency.

    history: usage (no recurring charges) per day, oldest first, the last item being
    `complete_through`; days without cost are 0. lag_actuals: usage already in the ledger for
    the days complete_through+1 .. as_of. recurring: recurring charges per day after as_of.
    """

    history: Sequence[Decimal]
    complete_through: date
    as_of: date
    period_end: date
    lag_actuals: Mapping[date, Decimal] = field(default_factory=dict)
    recurring: Mapping[date, Decimal] = field(default_factory=dict)


@dataclass
class Forecast:
    """The expected spend after `as_of` (not including actual to date) and its p10..p90."""

    expected: Decimal
    low: Decimal
    high: Decimal
    method: str
    # Expected spend per day after as_of (usage + recurring), for the burn-down chart; lag-day
    # top-ups are included in `expected` but kept out of this per-day series.
    daily: dict[date, Decimal] = field(default_factory=dict)
    # Cumulative p10 / p90 half-width per day after as_of (same days as daily).
    spread: dict[date, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class _Model:
    level: Decimal
    slope: Decimal
    # Index into the history (the window's mean index) the level refers to.
    origin: Decimal
    offsets: tuple[Decimal, ...]
    sigma: Decimal
    level_se: Decimal
    method: str

    def expected(self, *, index: int, weekday: int) -> Decimal:
        value = self.level + self.slope * (index - self.origin) + self.offsets[weekday]
        return max(value, ZERO)


def _mean(values: Sequence[Decimal]) -> Decimal:
    return sum(values, ZERO) / len(values) if values else ZERO


def _stdev(values: Sequence[Decimal]) -> Decimal:
    if len(values) < 2:
        return ZERO
    mean = _mean(values)
    return (sum(((v - mean) ** 2 for v in values), ZERO) / (len(values) - 1)).sqrt()


def _trend(values: Sequence[Decimal]) -> tuple[Decimal, Decimal]:
    """Least-squares slope of values over 0..n-1 and its t-statistic (0 when undefined)."""
    n = len(values)
    if n < 3:
        return ZERO, ZERO
    mean_t = Decimal(n - 1) / 2
    mean_v = _mean(values)
    sxx = sum(((Decimal(i) - mean_t) ** 2 for i in range(n)), ZERO)
    slope = sum(((Decimal(i) - mean_t) * (v - mean_v) for i, v in enumerate(values)), ZERO) / sxx
    intercept = mean_v - slope * mean_t
    residuals = [v - (intercept + slope * i) for i, v in enumerate(values)]
    sse = sum((r * r for r in residuals), ZERO)
    if sse == 0:
        return slope, (ZERO if slope == 0 else Decimal("1e9"))
    se = (sse / (n - 2) / sxx).sqrt()
    return slope, slope / se


def _fit(history: Sequence[Decimal], first_weekday: int, window_days: int) -> _Model:
    """The usage model over the last `window_days` of history (history[0] falls on
    first_weekday): day-of-week offsets once 14 days exist, then level and trend."""
    if not history:
        return _Model(ZERO, ZERO, ZERO, (ZERO,) * 7, ZERO, ZERO, "none")
    offsets = [ZERO] * 7
    method = "run-rate"
    window = list(history[-window_days:])
    if len(window) >= SEASONAL_MIN_DAYS:
        # Whole weeks only, so each weekday weighs the same in the offsets and the level.
        window = window[-(len(window) // 7 * 7) :]
        begin = len(history) - len(window)
        overall = _mean(window)
        for w in range(7):
            day_values = [v for i, v in enumerate(window) if (first_weekday + begin + i) % 7 == w]
            offsets[w] = _mean(day_values) - overall
        method = "weekday"
    start = len(history) - len(window)
    weekday_of = [(first_weekday + start + i) % 7 for i in range(len(window))]
    deseasoned = [v - offsets[w] for v, w in zip(window, weekday_of, strict=True)]
    n = len(deseasoned)
    slope = ZERO
    if n >= TREND_MIN_DAYS:
        fitted_slope, t_stat = _trend(deseasoned)
        if abs(t_stat) > TREND_T:
            slope = fitted_slope
            method += "+trend"
    mean_index = Decimal(n - 1) / 2
    level = _mean(deseasoned)
    residuals = [v - (level + slope * (i - mean_index)) for i, v in enumerate(deseasoned)]
    sigma = _stdev(residuals)
    level_se = sigma / Decimal(n).sqrt()
    return _Model(
        level=level,
        slope=slope,
        origin=start + mean_index,
        offsets=tuple(offsets),
        sigma=sigma,
        level_se=level_se,
        method=method,
    )


def _select(history: Sequence[Decimal], first_weekday: int) -> _Model:
    """The candidate window whose model, fitted without the last HOLDOUT_DAYS, forecast their
    sum closest; the shortest on a tie or when the history is too short to tell."""
    best, best_error = WINDOWS[0], None
    if len(history) >= WINDOWS[0] + HOLDOUT_DAYS:
        head, tail = history[:-HOLDOUT_DAYS], history[-HOLDOUT_DAYS:]
        for window_days in WINDOWS:
            model = _fit(head, first_weekday, window_days)
            predicted = sum(
                (
                    model.expected(index=len(head) + i, weekday=(first_weekday + len(head) + i) % 7)
                    for i in range(HOLDOUT_DAYS)
                ),
                ZERO,
            )
            error = abs(predicted - sum(tail, ZERO))
            if best_error is None or error < best_error:
                best, best_error = window_days, error
    return _fit(history, first_weekday, best)


def forecast_rest(data: ForecastInput) -> Forecast:
    """Expected spend after as_of, plus the lag days' missing part, with its p10..p90."""
    history = list(data.history)
    first_day = data.complete_through - timedelta(days=len(history) - 1)
    model = _select(history, first_day.weekday())
    daily: dict[date, Decimal] = {}
    spread: dict[date, Decimal] = {}
    expected = ZERO
    days = 0
    day = data.complete_through + timedelta(days=1)
    while day <= data.period_end:
        index = (day - first_day).days
        usage = model.expected(index=index, weekday=day.weekday())
        days += 1
        if day <= data.as_of:
            # Not delivered in full yet: forecast, but never below what is already booked.
            expected += max(ZERO, usage - data.lag_actuals.get(day, ZERO))
        else:
            daily[day] = usage + data.recurring.get(day, ZERO)
            expected += daily[day]
            spread[day] = _half_width(model, days)
        day += timedelta(days=1)
    half = _half_width(model, days)
    return Forecast(
        expected=expected,
        low=max(expected - half, _recurring_after(data)),
        high=expected + half,
        method=model.method,
        daily=daily,
        spread=spread,
    )


def _recurring_after(data: ForecastInput) -> Decimal:
    return sum((v for d, v in data.recurring.items() if d > data.as_of), ZERO)


def _half_width(model: _Model, days: int) -> Decimal:
    """Z90 x the standard deviation of the sum of `days` forecast days."""
    if days <= 0:
        return ZERO
    m = Decimal(days)
    variance = m * model.sigma**2 + (m * model.level_se) ** 2
    return Z90 * variance.sqrt()


def run_rate_forecast(*, month_to_date: Decimal, days_elapsed: int, days_in_period: int) -> Decimal:
    """The naive baseline (OptScale's): month to date / days elapsed x days in the period."""
    if days_elapsed <= 0:
        return ZERO
    return month_to_date / days_elapsed * days_in_period
