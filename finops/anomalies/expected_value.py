"""The expected value of one day of a cost series and its spread, fitted to the history that
detector.py chooses for that day: weekday seasonality, a Theil-Sen trend and a robust (MAD)
spread, as the detector's docstring describes. Pure Python and Decimal, no ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache

ZERO = Decimal(0)
ONE = Decimal(1)
_MAD_TO_SIGMA = Decimal("1.4826")
_MIN_RELATIVE_SIGMA = Decimal("0.01")
# Pairs closer than this do not vote for the trend: adjacent days differ by noise mostly.
_TREND_MIN_SPAN = 7
# A trend is used when its slope is this many standard errors from 0.
_TREND_T = Decimal(3)
# How many days past its history's newest day a trend is extrapolated.
_TREND_HORIZON = 7
# The smallest history to compute any expected value from (after an accepted level shift).
_MIN_FIT_DAYS = 3
# Weight of the weekday group's median in a weekday's factor, in samples.
_SHRINK = 3


def median(values: Sequence[Decimal]) -> Decimal:
    ordered = sorted(values)
    n = len(ordered)
    middle = n // 2
    return ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2


@dataclass(slots=True)
class Fit:
    """The expected value and sigma of day t, and the model that gave them."""

    expected: Decimal
    sigma: Decimal
    # The model, to evaluate another day d: (level - slope x (t - d)) x season[weekday(d)].
    t: int = 0
    level: Decimal = ZERO
    slope: Decimal = ZERO
    relative_sigma: Decimal = ZERO
    season: dict[int, Decimal] | None = None

    def at(self, position: int, weekday: int) -> tuple[Decimal, Decimal]:
        """Expected value and sigma of another day under this fit."""
        factor = self.season.get(weekday, ONE) if self.season else ONE
        # No further along the trend than the fit's own day (its horizon).
        expected = max(ZERO, (self.level - self.slope * max(0, self.t - position)) * factor)
        return expected, self.relative_sigma * expected


def _group(weekday: int) -> int:
    return 1 if weekday >= 5 else 0


def _shrunk(own: list[Decimal], group: list[Decimal], overall: Decimal) -> Decimal:
    """A weekday's factor: its median, shrunk toward the median of its group (workdays or the
    weekend) as if _SHRINK more samples said the group's value; with 2-6 samples a weekday's
    own median is mostly noise, the group's is not."""
    n = len(own)
    return (n * median(own) + _SHRINK * median(group)) / ((n + _SHRINK) * overall)


def _seasonal_factors(
    values: list[Decimal], weekdays: list[int]
) -> tuple[dict[int, Decimal], list[Decimal]] | None:
    """Weekday factors, and for each history day its factor computed without that day.

    The leave-one-out factors give honest residuals: a weekday median of 4 samples sits right
    between its middle samples, so in-sample residuals would understate the noise."""
    by_day: dict[int, list[Decimal]] = {}
    by_group: dict[int, list[Decimal]] = {}
    for value, weekday in zip(values, weekdays, strict=True):
        by_day.setdefault(weekday, []).append(value)
        by_group.setdefault(_group(weekday), []).append(value)
    if len(by_day) < 7 or min(len(v) for v in by_day.values()) < 2:
        return None
    overall = median(values)
    if overall <= 0:
        return None
    factors = {w: _shrunk(v, by_group[_group(w)], overall) for w, v in by_day.items()}
    loo: list[Decimal] = []
    for value, weekday in zip(values, weekdays, strict=True):
        own = list(by_day[weekday])
        own.remove(value)
        group = list(by_group[_group(weekday)])
        group.remove(value)
        loo.append(_shrunk(own, group, overall))
    return factors, loo


def _theil_sen(points: list[tuple[int, Decimal]]) -> Decimal:
    slopes = [
        (dj - di) / (j - i)
        for a, (i, di) in enumerate(points)
        for j, dj in points[a + 1 :]
        if abs(j - i) >= _TREND_MIN_SPAN
    ]
    return median(slopes) if slopes else ZERO


def _significant(slope: Decimal, points: list[tuple[int, Decimal]]) -> Decimal:
    """slope when it is at least _TREND_T standard errors from 0, else 0: noise in a few weeks
    of history leaves a slope too, and a slope is extrapolated. The standard error is the least
    squares one, with the residuals' spread read robustly (1.4826 x MAD)."""
    if slope == 0 or len(points) < 3:
        return ZERO
    n = len(points)
    mean_x = sum((Decimal(p) for p, _ in points), ZERO) / n
    sxx = sum(((Decimal(p) - mean_x) ** 2 for p, _ in points), ZERO)
    if sxx <= 0:
        return ZERO
    intercept = median([d - slope * p for p, d in points])
    residuals = [d - intercept - slope * p for p, d in points]
    centre = median(residuals)
    spread = _MAD_TO_SIGMA * median([abs(r - centre) for r in residuals])
    se = spread / sxx.sqrt()
    return slope if abs(slope) >= _TREND_T * se else ZERO


# No history point with a positive factor: nothing expected (its t is 0, not relative).
_EMPTY_FIT = Fit(ZERO, ZERO)
# Fits kept (a re-evaluation of later months fits the same histories again: each month's
# anomalies step re-reads LOOKBACK_DAYS before it). A fit is a pure function of its history.
_FITS_KEPT = 16384


def fit_day(
    positions: list[int], values: list[Decimal], weekdays: list[int], t: int, weekday: int
) -> Fit | None:
    """Expected value and sigma at position t from history (positions are day numbers).

    Computed in days before t (t - position), so the same history gives the same fit whatever
    day the series starts on; kept in a bounded cache keyed by the history's exact values
    (sign and exponent too: 1.0 and 1.00 are the same number, not the same text)."""
    if len(values) < _MIN_FIT_DAYS:
        return None
    key = (
        tuple(t - p for p in positions),
        tuple(values),
        tuple(-2 * int(v.as_tuple().exponent) + v.is_signed() for v in values),
        tuple(weekdays),
        weekday,
    )
    fit, relative = _fit_before(key)
    return replace(fit, t=fit.t + t) if fit is not None and relative and t else fit


@lru_cache(maxsize=_FITS_KEPT)
def _fit_before(
    key: tuple[tuple[int, ...], tuple[Decimal, ...], tuple[int, ...], tuple[int, ...], int],
) -> tuple[Fit | None, bool]:
    """The fit at day 0 of a history given in days before it, and whether its t is relative
    (False: the empty fit, whose t is 0 wherever it is asked)."""
    before, values, _, weekdays, weekday = key
    fit = _fit_day([-d for d in before], list(values), list(weekdays), 0, weekday)
    return fit, fit is not None and fit is not _EMPTY_FIT


def _fit_day(
    positions: list[int], values: list[Decimal], weekdays: list[int], t: int, weekday: int
) -> Fit | None:
    if len(values) < _MIN_FIT_DAYS:
        return None
    seasonal = _seasonal_factors(values, weekdays) if len(values) >= 14 else None
    season = seasonal[0] if seasonal else None
    factors = [season[w] if season else ONE for w in weekdays]
    held_out = seasonal[1] if seasonal else factors
    points = [(p, v / f) for p, v, f in zip(positions, values, factors, strict=True) if f > 0]
    if not points:
        return _EMPTY_FIT
    slope = _significant(_theil_sen(points), points) if len(values) >= 14 else ZERO
    # The trend is followed _TREND_HORIZON days past the newest history day at most: the days of
    # a long event are out of the history, and the slope of the weeks before it goes no further.
    t = min(t, max(positions) + _TREND_HORIZON)
    level = median([d + slope * (t - p) for p, d in points])
    factor_t = season.get(weekday, ONE) if season else ONE
    expected = max(ZERO, level * factor_t)
    relative: list[Decimal] = []
    for p, v, f in zip(positions, values, held_out, strict=True):
        fitted = (level - slope * (t - p)) * f
        if fitted > 0:
            relative.append(v / fitted - 1)
    relative_sigma = ZERO
    if relative:
        centre = median(relative)
        mad = median([abs(r - centre) for r in relative])
        relative_sigma = max(_MAD_TO_SIGMA * mad, _MIN_RELATIVE_SIGMA)
    return Fit(expected, relative_sigma * expected, t, level, slope, relative_sigma, season)
