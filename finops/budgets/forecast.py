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
  variance = m x sigma^2 (day-to-day noise) + (m x se_level)^2 (the level is an estimate)
  + (lever x se_slope)^2 when a trend is used (its error grows with the horizon), times a
  calibration factor: the root mean square of the fit's standardised errors on the sums of the
  same horizon (at most 21 days) after 4 origins a week apart at the end of the history, shrunk
  toward 1 (as if 2 more had been exact), within 0.8..3. A level change, a trend or tails the
  fit's own spread does not see show in those errors (bench/forecast.py, 200 series per kind:
  the band held the month's total 24 % of the time after a level change, 81 % now). On a rising
  trend the band is also scaled by the level at the horizon's middle over the window's mean
  level: noise is proportional to the level (growing series: 69 % held, 73 % since).

Pure so that bench/forecast.py can backtest exactly what the budgets use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from decimal import Decimal

# Candidate trailing windows: the one that forecast the last HOLDOUT_DAYS of the history best
# (from the days before them) is used. A long window averages noise away; a short one follows a
# change of level (a new workload, a month generated afresh) sooner.
WINDOWS = (28, 56)
WINDOW_DAYS = max(WINDOWS)
HOLDOUT_DAYS = 7
# The band's calibration: the fit's errors on each of the history's last 4 weeks.
CALIBRATION_WEEKS = 4
MAX_INFLATION = Decimal(3)
MIN_INFLATION = Decimal("0.8")
PRIOR_WEEKS = 2
CALIBRATION_HORIZON = 21
SEASONAL_MIN_DAYS = 14
TREND_MIN_DAYS = 7
TREND_T = Decimal(3)
# A trend this significant over the window is used when the longest window confirms it.
TREND_T_SUPPORTED = Decimal(2)
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
    # The standard error of a slope fitted over the window (whether or not one is used): the
    # band's allowance for a trend the window cannot tell from noise yet.
    slope_se: Decimal = ZERO
    # How much wider the band must be than the fit's own spread says, from the fit's errors
    # on the last weeks of the history (calibrate; 1 when not calibrated).
    inflation: Decimal = ONE
    # Index of the history's last day (the forecast starts the day after).
    last: Decimal = ZERO
    # The trailing window fitted (days).
    window: int = 0

    @property
    def origin_gap(self) -> Decimal:
        return self.last - self.origin

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


def _slope_se(values: Sequence[Decimal]) -> Decimal:
    """The standard error of the least-squares slope of values over 0..n-1 (0 when undefined)."""
    slope, t_stat = _trend(values)
    return abs(slope / t_stat) if t_stat != 0 and abs(t_stat) < Decimal("1e9") else ZERO


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
        if abs(t_stat) > TREND_T or _supported(history, first_weekday, offsets, t_stat):
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
        slope_se=_slope_se(deseasoned) if slope != 0 else ZERO,
        last=Decimal(len(history) - 1),
        window=window_days,
    )


def _supported(
    history: Sequence[Decimal], first_weekday: int, offsets: Sequence[Decimal], t_stat: Decimal
) -> bool:
    """Whether a trend the window shows weakly (|t| > TREND_T_SUPPORTED) is significant over
    the longest window too, in the same direction: a steady growth 28 days cannot tell from
    noise but 56 can is growth (a level change inside the short window shows in both)."""
    if abs(t_stat) <= TREND_T_SUPPORTED:
        return False
    longest = history[-WINDOW_DAYS:]
    begin = len(history) - len(longest)
    deseasoned = [v - offsets[(first_weekday + begin + i) % 7] for i, v in enumerate(longest)]
    _, long_t = _trend(deseasoned)
    return abs(long_t) > TREND_T and (long_t > 0) == (t_stat > 0)


def _calibrate(
    history: Sequence[Decimal], first_weekday: int, window_days: int, horizon: int
) -> Decimal:
    """The band's inflation: the root mean square of the fit's standardised errors on the sums
    of `horizon` days (at most CALIBRATION_HORIZON) that follow each of CALIBRATION_WEEKS
    origins a week apart at the end of the history (fitted on the days before each, with the
    same window), shrunk toward 1, within MIN_INFLATION..MAX_INFLATION. A level change, a
    trend the window has not caught, noise heavier than normal: the fit's errors show it."""
    squares: list[Decimal] = []
    length = max(1, min(horizon, CALIBRATION_HORIZON))
    for week in range(CALIBRATION_WEEKS):
        cut = len(history) - length - 7 * week
        if cut < SEASONAL_MIN_DAYS:
            break
        head, tail = history[:cut], history[cut : cut + length]
        model = _fit(head, first_weekday, window_days)
        predicted = sum(
            (
                model.expected(index=cut + i, weekday=(first_weekday + cut + i) % 7)
                for i in range(len(tail))
            ),
            ZERO,
        )
        spread = _half_width(model, len(tail)) / Z90
        if spread > 0:
            squares.append(((sum(tail, ZERO) - predicted) / spread) ** 2)
    if not squares:
        return ONE
    # Shrunk toward 1 as if PRIOR_WEEKS more weeks had been as expected: four weeks alone
    # would make a noisy factor.
    shrunk = (sum(squares, ZERO) + PRIOR_WEEKS) / (len(squares) + PRIOR_WEEKS)
    return min(max(MIN_INFLATION, shrunk.sqrt()), MAX_INFLATION)


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


def forecast_rest(data: ForecastInput, *, calibrated: bool = True) -> Forecast:
    """Expected spend after as_of, plus the lag days' missing part, with its p10..p90
    (calibrated on the history's last weeks unless `calibrated` is False: bench/forecast.py
    measures both)."""
    history = list(data.history)
    first_day = data.complete_through - timedelta(days=len(history) - 1)
    model = _select(history, first_day.weekday())
    if calibrated:
        horizon = (data.period_end - data.complete_through).days
        inflation = _calibrate(history, first_day.weekday(), model.window, horizon)
        model = replace(model, inflation=inflation)
    else:
        model = replace(model, slope_se=ZERO)
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
    """Z90 x the standard deviation of the sum of `days` forecast days: day-to-day noise, the
    level's error, the slope's error (it grows with the horizon), times the inflation the
    history's last weeks called for."""
    if days <= 0:
        return ZERO
    m = Decimal(days)
    # Sum over the horizon of the distance (in days) from the window's middle, about m x
    # (the distance to the horizon's middle): the slope's error weighs that much per day.
    lever = m * (Decimal(days + 1) / 2 + model.origin_gap)
    # Noise and the level's error scale with the level ahead; the slope's error does not.
    scale = _noise_scale(model, days)
    noise = (m * model.sigma**2 + (m * model.level_se) ** 2) * scale**2
    variance = noise + (lever * model.slope_se) ** 2
    return Z90 * variance.sqrt() * model.inflation


def _noise_scale(model: _Model, days: int) -> Decimal:
    """How much larger the noise is over the next `days` than over the fitted window: costs
    vary in proportion to their level, so a series growing along its trend is noisier ahead
    (its level at the horizon's middle over the window's mean level), never less than 1 (a
    falling trend keeps the window's spread)."""
    if model.slope <= 0 or model.level <= 0:
        return ONE
    ahead = model.level + model.slope * (Decimal(days + 1) / 2 + model.origin_gap)
    return max(ONE, ahead / model.level)


def run_rate_forecast(*, month_to_date: Decimal, days_elapsed: int, days_in_period: int) -> Decimal:
    """The naive baseline (OptScale's): month to date / days elapsed x days in the period."""
    if days_elapsed <= 0:
        return ZERO
    return month_to_date / days_elapsed * days_in_period
