"""The anomaly detector: pure Python and Decimal, no ORM (the service feeds it series).

For each day t of a series, the expected value comes from the series' own history only:

- History: the last `window` (42) days before t that are not part of an unaccepted event, from
  the series' first day, or from the first day of the newest level shift someone marked
  `expected` (a new normal starts there). Month-start style recurring excess (below) is taken
  out of a history day before it is used.
- Weekday seasonality (14+ history days, 2+ of each weekday): season[w] = median of weekday w /
  median of all, multiplicative, as costs are.
- Trend (14+ history days): a Theil-Sen slope (median of pairwise slopes of the deseasonalised
  values, pairs at least a week apart so weekly noise cancels), so steady growth does not alert;
  used when it is 3 standard errors from 0 (a few noisy weeks leave a slope too), and followed
  7 days past the history's newest day at most (an event's days are out of the history).
  level(t) = median(d_j + slope x (t - j)); expected = max(0, level(t) x season[weekday(t)]).
- Spread: sigma = 1.4826 x MAD of the relative in-sample residuals (robust; at least 1 %),
  times the expected value: noise is proportional to the level.
- Recurring monthly excess: when the same day of the previous month was out of band but not an
  anomaly (seen during warm-up, itself recurring, or marked expected), its excess is expected
  again: a support fee on the 1st of every month is learnt once, not alerted monthly. So is the
  day as far from the previous month's end (month-end load: the 30th of November's twin is the
  31st of October), the larger of the two. With the month_end rule a twin's excess is read both
  as a sum (a fee) and as a factor of the day's level (load learnt on a Sunday is larger on a
  Monday), the larger counts, and such a day's sigma is in proportion to its level, times
  sqrt(2) (the twin's own noise is in the excess).
- Level changes (price cuts, ramps): when the last 5 normal days all sit on one side of their
  expected value by >= 5 % and 1.5 sigma, history before the first of them is rescaled by
  their median ratio to expected, so the new level is the baseline within a week, weekday
  shape kept (the old code took up to the 42-day window's half to follow a price cut).
- Ramps (new runs ramping up, ramp.py): when the ratios of the last 14 normal days to their
  expected value rise along a significant line (Theil-Sen, t >= 2) that ends above 1, the day's
  expected value follows the line; a ramp followed 5+ days sets, when it ends, a new level (the
  days before it rescaled by the ramp's last expected value over what they expect on that day,
  its own days out of the history).
- Late bills and catch-up days: what the last 3 days fell short of their band's lower edge is
  set against a day's excess before it is judged (a bill booked a day late, the work a holiday
  deferred).
- Sparse series (>= 30 % of the history's days at zero: a small team): the rule above would see
  every active day as a spike; instead a day is a spike when it is >= 2x the history's largest
  day, and 5 days in a row of cost, each at least the median active day, summing to >= 2x the
  history's largest 5-day sum, are a level shift (extended while it goes on).

Each of these five rules is a DetectorSettings switch; bench/anomalies.py measures the detector
with them on and off on hard series (bench/anomaly_series.py).

Events (upward only: a cost drop pages nobody):

- A day opens a candidate when its robust z >= `threshold` and it is >= min_percent above the
  expected value; a candidate goes on while days stay z >= `continue_threshold` and >= half the
  percent floor, tolerating `max_gap` normal days; it ends after that.
- A candidate is an anomaly once its impact (sum of actual - expected over its days, times the
  day's weight: 1 for money series, requests/1,000 for a cost per 1k requests, node cost for an
  idle share) reaches min_impact AND its percent over expected reaches min_percent.
- Kind: `level_shift` once it has lasted `level_shift_days` (3) days, else `spike`. A level shift
  is one event extended day by day until it ends, or until it is marked expected.
- Nothing is evaluated before `min_history` (14) days of the series exist.

The fit of a day (seasonality, trend, spread) is expected_value.py; the ramp rule's line is
ramp.py; the settings and results are detector_types.py; new cost sources are new_sources.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from finops.anomalies.detector_types import (
    LEVEL_SHIFT,
    NEW_SOURCE,
    SPIKE,
    Accepted,
    DayFit,
    Detection,
    DetectorSettings,
    Event,
)
from finops.anomalies.expected_value import ONE, ZERO, Fit, fit_day, median
from finops.anomalies.ramp import ramp_factor
from finops.anomalies.sparse_rule import SparseRule

__all__ = [
    "LEVEL_SHIFT",
    "NEW_SOURCE",
    "SPIKE",
    "Accepted",
    "DayFit",
    "Detection",
    "DetectorSettings",
    "Event",
    "detect",
]

_HUNDRED = Decimal(100)
_SQRT2 = Decimal(2).sqrt()


def _percent(deviation: Decimal, expected: Decimal) -> Decimal | None:
    """deviation as a percent of expected; None when nothing was expected (infinitely more)."""
    return deviation * _HUNDRED / expected if expected > 0 else None


def _clears_percent(deviation: Decimal, expected: Decimal, floor: Decimal) -> bool:
    pct = _percent(deviation, expected)
    return deviation > 0 if pct is None else pct >= floor


def _same_day_previous_month(day: dt.date) -> dt.date | None:
    year, month = (day.year, day.month - 1) if day.month > 1 else (day.year - 1, 12)
    try:
        return day.replace(year=year, month=month)
    except ValueError:  # the 31st of a 30-day month has no twin
        return None


def _same_distance_from_previous_month_end(day: dt.date) -> dt.date:
    """The day as many days before the end of the previous month as `day` is before its own
    month's end (the 30th of November -> the 31st of October; the 28th of February -> the 31st
    of January)."""
    first = day.replace(day=1)
    next_first = (first + dt.timedelta(days=32)).replace(day=1)
    to_end = (next_first - day).days
    return first - dt.timedelta(days=to_end)


@dataclass(slots=True)
class _Candidate:
    first: int
    last: int
    days: list[int]
    gap: int = 0
    reported_on: int | None = None
    peak_z: Decimal = ZERO


class _Run(SparseRule):
    """One pass over a series, day by day (each day sees only the days before it)."""

    def __init__(
        self,
        days: Sequence[dt.date],
        values: Sequence[Decimal | None],
        weights: Sequence[Decimal],
        settings: DetectorSettings,
        accepted: Sequence[Accepted],
    ) -> None:
        self.days = days
        self.values = values
        self.weights = weights
        self.settings = settings
        self.index = {day: i for i, day in enumerate(days)}
        self.accepted_at: dict[int, Accepted] = {}
        for event in accepted:
            for i, day in enumerate(days):
                if event.first <= day <= event.last:
                    self.accepted_at[i] = event
        self.start = next((i for i, v in enumerate(values) if v is not None and v > 0), None)
        self.excluded: set[int] = set()
        self.expected: dict[int, Decimal] = {}
        self.sigma: dict[int, Decimal] = {}
        self.events: list[Event] = []
        self.candidate: _Candidate | None = None
        # Catch-up: what each recent day fell short of its band's lower edge, not yet set
        # against a later day's excess.
        self.shortfall: dict[int, Decimal] = {}
        # Level changes: (first position of the new level, ratio new / old), oldest first.
        self.breaks: list[tuple[int, Decimal]] = []
        self.adapt_checked = -1
        # Ramps: the days the ramp rule raised the expected value, and its last expected value.
        self.ramp_run: list[int] = []
        self.ramp_expected = ZERO
        # Days of ended ramps: out of the history, yet still twins for the month-end rule.
        self.ramp_excluded: set[int] = set()

    def _history_start(self, t: int) -> int:
        start = self.start or 0
        for i, event in self.accepted_at.items():
            if event.kind == LEVEL_SHIFT and i < t and self.days[i] == event.first:
                start = max(start, i)
        return start

    def _history(self, t: int) -> tuple[list[int], list[Decimal], list[int]]:
        positions: list[int] = []
        values: list[Decimal] = []
        weekdays: list[int] = []
        j = t - 1
        floor = self._history_start(t)
        while j >= floor and len(values) < self.settings.window:
            value = self.values[j]
            if value is not None and j not in self.excluded and j not in self.ramp_excluded:
                positions.append(j)
                values.append(value * self._scale(j))
                weekdays.append(self.days[j].weekday())
            j -= 1
        return positions, values, weekdays

    def _scale(self, j: int) -> Decimal:
        """The product of the level changes after position j (1 when none)."""
        scale = ONE
        for first, ratio in self.breaks:
            if j < first:
                scale *= ratio
        return scale

    def _adapt(self, t: int) -> None:
        """Record a level change when the last adapt_days evaluated, normal days before t all
        sit on one side of their expected value by adapt_percent and 1.5 sigma or more."""
        s = self.settings
        recent = [
            j
            for j in range(t - s.adapt_days, t)
            if j >= 0 and j in self.expected and j not in self.excluded
            and j not in self.accepted_at and self.values[j] is not None
        ]  # fmt: skip
        if len(recent) < s.adapt_days or recent[0] <= self.adapt_checked:
            return
        ratios = []
        for j in recent:
            expected, sigma, value = self.expected[j], self.sigma[j], self.values[j]
            if expected <= 0 or value is None:
                return
            deviation = value - expected
            floor = max(expected * s.adapt_percent / _HUNDRED, sigma * Decimal("1.5"))
            if abs(deviation) < floor:
                return
            ratios.append(value / expected)
        if not (all(r > ONE for r in ratios) or all(r < ONE for r in ratios)):
            return
        level = median(ratios)
        # The new level starts on the first of these days nearer to it than to the old one.
        nearer = (j for j, r in zip(recent, ratios, strict=True) if abs(r - level) < abs(r - ONE))
        first = next(nearer, recent[0])
        self.breaks.append((first, level))
        self.adapt_checked = t - 1

    def _recurring_excess(self, t: int, fit: Fit, base: Decimal) -> Decimal:
        """The excess of the same day last month (and, with the month_end rule, of the day as
        far from last month's end), the larger, when that day was above the band's inner edge
        (continue_threshold) under the fit, which has its weekday factors and trend, yet no
        anomaly: a recurring charge, month-end load. base: day t's expected value under the fit.
        A fee is a sum (the same on a Sunday), month-end or month-start load a factor of the
        day's level (closing jobs run at the scale of the team's work, so a load learnt on a
        Sunday is larger on a Monday): with the month_end rule, the larger reading counts."""
        same_day = _same_day_previous_month(self.days[t])
        excess = self._twin_excess(same_day, fit, None)
        if self.settings.month_end:
            excess = max(excess, self._twin_excess(same_day, fit, base))
            twin = _same_distance_from_previous_month_end(self.days[t])
            excess = max(excess, self._twin_excess(twin, fit, base))
        return excess

    def _twin_excess(self, previous: dt.date | None, fit: Fit, base: Decimal | None) -> Decimal:
        """The twin day's excess over its expected value (a sum; with base, its ratio to the
        expected value applied to base)."""
        p = self.index.get(previous) if previous else None
        if p is None or self.start is None or p < self.start or p in self.excluded:
            return ZERO
        value = self.values[p]
        if value is None:
            return ZERO
        expected, sigma = fit.at(p, self.days[p].weekday())
        excess = value * self._scale(p) - expected  # at today's level (after a price cut)
        if self._z(excess, sigma) < self.settings.continue_threshold:
            return ZERO
        if base is None or expected <= 0:
            return excess
        return base * excess / expected

    def run(self) -> Detection:
        for t in range(len(self.days)):
            self._step(t)
        if self.candidate is not None:
            self._close(self.candidate, ongoing=True)
        return Detection(events=self.events, fits=self._fits())

    def _step(self, t: int) -> None:
        value = self.values[t]
        if value is None or self.start is None or t < self.start:
            return
        if self.settings.adapt_level:
            self._adapt(t)
        positions, history, weekdays = self._history(t)
        if self.settings.sparse_rule and self._sparse(history):
            self._sparse_step(t, value, history)
            return
        fit = fit_day(positions, history, weekdays, t, self.days[t].weekday())
        if fit is None:
            return
        # The ramp rule's line needs the warm-up's days: on fewer it is noise.
        ramps = self.settings.ramp and t - self.start >= self.settings.min_history
        factor = self._ramp(t, positions, history, fit) if ramps else None
        if factor is None and self.ramp_run:
            self._end_ramp()
            positions, history, weekdays = self._history(t)
            fit = fit_day(positions, history, weekdays, t, self.days[t].weekday())
            if fit is None:
                return
        excess = self._recurring_excess(t, fit, fit.expected)
        expected, sigma = fit.expected + excess, fit.sigma
        if excess > 0 and self.settings.month_end:
            # Noise in proportion to the day's level, and the twin's own noise in the excess.
            sigma = fit.relative_sigma * expected * _SQRT2
        if factor is not None:
            expected = max(expected, fit.expected * factor)
            self.ramp_run.append(t)
            self.ramp_expected = fit.expected * factor
        self.expected[t], self.sigma[t] = expected, sigma
        if t in self.accepted_at or t - self.start < self.settings.min_history:
            return
        if self.settings.catch_up:
            expected = self._catch_up(t, value, expected, sigma)
            self.expected[t] = expected
        z = self._z(value - expected, sigma)
        if z >= self.settings.threshold or self.candidate is not None:
            self._track(t, value, expected, z)

    def _end_ramp(self) -> None:
        """A ramp is over: the level it reached is the new baseline (the days before it are
        rescaled to it) and its own days, with the days its line was first fitted on, leave
        the history (they are neither the old level nor the new one)."""
        if len(self.ramp_run) < self.settings.ramp_min_run:
            self.ramp_run = []  # a few high days (month-end load, noise), not a new level
            return
        first = self.ramp_run[0] - self.settings.ramp_days // 2
        last = self.ramp_run[-1]
        span = set(range(max(0, first), last + 1)) - self.ramp_excluded
        self.ramp_excluded |= span
        self.ramp_run = []
        # The new level: where the ramp's line reached on its last day, over what the history
        # before the ramp expects on that day (the fit's trend may have followed part of it).
        # With too little history before it, the ramp's days stay in the history instead.
        positions, history, weekdays = self._history(last)
        before = fit_day(positions, history, weekdays, last, self.days[last].weekday())
        if before is None or before.expected <= 0:
            self.ramp_excluded -= span
            return
        self.breaks.append((first, self.ramp_expected / before.expected))

    def _ramp(
        self, t: int, positions: list[int], history: list[Decimal], fit: Fit
    ) -> Decimal | None:
        """The factor on the fit's expected value along a ramp of the last ramp_days normal
        days (ramp.py), or None."""
        points = []
        for p, v in zip(positions[: self.settings.ramp_days], history, strict=False):
            base, _ = fit.at(p, self.days[p].weekday())
            base += self._recurring_excess(p, fit, base)  # month-end load is no ramp
            if base > 0:
                points.append((p, v / base))
        factor = ramp_factor(points, t, min_t=self.settings.ramp_t)
        floor = ONE + self.settings.adapt_percent / _HUNDRED  # a line within noise is no ramp
        return factor if factor is not None and factor >= floor else None

    def _catch_up(self, t: int, value: Decimal, expected: Decimal, sigma: Decimal) -> Decimal:
        """Record day t's shortfall below its band's lower edge, or set its excess against the
        shortfall of the days before (late bills, work done after a holiday): the expected
        value raised by what is credited."""
        s = self.settings
        for j in [j for j in self.shortfall if j < t - s.catch_up_days]:
            del self.shortfall[j]
        edge = expected - s.continue_threshold * sigma
        if value < edge:
            self.shortfall[t] = edge - value
            return expected
        excess = value - expected
        credit = ZERO
        for j in sorted(self.shortfall):
            if excess <= credit:
                break
            used = min(self.shortfall[j], excess - credit)
            credit += used
            self.shortfall[j] -= used
        return expected + credit

    @staticmethod
    def _z(deviation: Decimal, sigma: Decimal) -> Decimal:
        if sigma > 0:
            return deviation / sigma
        return Decimal("Infinity") if deviation > 0 else ZERO

    def _track(self, t: int, value: Decimal, expected: Decimal, z: Decimal) -> None:
        s = self.settings
        deviation = value - expected
        candidate = self.candidate
        if candidate is None:
            if _clears_percent(deviation, expected, s.min_percent):
                self.candidate = _Candidate(first=t, last=t, days=[t], peak_z=z)
                self.excluded.add(t)
                self._maybe_report(self.candidate, t)
            return
        if z >= s.continue_threshold and _clears_percent(deviation, expected, s.min_percent / 2):
            candidate.last = t
            candidate.days.append(t)
            candidate.gap = 0
            candidate.peak_z = max(candidate.peak_z, z)
            self.excluded.add(t)
            self._maybe_report(candidate, t)
            return
        candidate.gap += 1
        if candidate.gap > s.max_gap:
            self._close(candidate, ongoing=False)
            self.candidate = None

    def _sums(self, candidate: _Candidate) -> tuple[Decimal, Decimal]:
        actual = expected = ZERO
        for i in range(candidate.first, candidate.last + 1):
            value = self.values[i]
            if value is None or i not in self.expected:
                continue
            actual += value * self.weights[i]
            expected += self.expected[i] * self.weights[i]
        return actual, expected

    def _maybe_report(self, candidate: _Candidate, t: int) -> None:
        if candidate.reported_on is not None:
            return
        actual, expected = self._sums(candidate)
        impact = actual - expected
        if impact >= self.settings.min_impact and _clears_percent(
            impact, expected, self.settings.min_percent
        ):
            candidate.reported_on = t

    def _close(self, candidate: _Candidate, *, ongoing: bool) -> None:
        if candidate.reported_on is None:
            return
        actual, expected = self._sums(candidate)
        length = candidate.last - candidate.first + 1
        kind = LEVEL_SHIFT if length >= self.settings.level_shift_days else SPIKE
        self.events.append(
            Event(
                kind=kind,
                first=self.days[candidate.first],
                last=self.days[candidate.last],
                actual=actual,
                expected=expected,
                reported_on=self.days[candidate.reported_on],
                ongoing=ongoing,
                peak_z=candidate.peak_z,
            )
        )

    def _fits(self) -> list[DayFit]:
        k = self.settings.threshold
        fits = []
        for i, day in enumerate(self.days):
            expected = self.expected.get(i)
            if expected is None:
                fits.append(DayFit(day, self.values[i], None, None, None))
                continue
            spread = k * self.sigma[i]
            fits.append(DayFit(day, self.values[i], expected, max(ZERO, expected - spread),
                               expected + spread))  # fmt: skip
        return fits


def detect(
    days: Sequence[dt.date],
    values: Sequence[Decimal | None],
    *,
    weights: Sequence[Decimal] | None = None,
    settings: DetectorSettings | None = None,
    accepted: Sequence[Accepted] = (),
) -> Detection:
    """Events of one daily series. days: consecutive dates; values: the series (None: no value
    that day, e.g. no requests); weights: money per series unit per day (default 1)."""
    if len(days) != len(values):
        raise ValueError("days and values differ in length")
    weights = weights if weights is not None else [ONE] * len(values)
    return _Run(days, values, weights, settings or DetectorSettings(), accepted).run()
