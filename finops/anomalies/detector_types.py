"""The detector's settings and results (detector.py runs it): plain dataclasses, no ORM."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

SPIKE = "spike"
LEVEL_SHIFT = "level_shift"
NEW_SOURCE = "new_source"


@dataclass(frozen=True, slots=True)
class DetectorSettings:
    min_impact: Decimal = Decimal(100)
    # Percent, e.g. 20 for 20 %.
    min_percent: Decimal = Decimal(20)
    min_history: int = 14
    window: int = 42
    threshold: Decimal = Decimal("5")
    continue_threshold: Decimal = Decimal(2)
    level_shift_days: int = 3
    max_gap: int = 1
    # New sources: the days after first sight whose cost counts towards the floor.
    new_source_days: int = 7
    # The rules of issue 28 (each can be switched off: bench/anomalies.py measures both).
    # Month-end load: the excess of the day as far from the previous month's end is expected.
    month_end: bool = True
    # Late bills and catch-up days: a day's excess is first set against what the previous
    # `catch_up_days` fell short of their band's lower edge (work booked, or done, late).
    catch_up: bool = True
    catch_up_days: int = 3
    # Level changes (price cuts, ramps): when the last `adapt_days` normal days all sit on one
    # side of expected, by at least max(adapt_percent, 1.5 sigma), history before them is
    # rescaled to their level (the weekday shape is kept).
    adapt_level: bool = True
    adapt_days: int = 5
    adapt_percent: Decimal = Decimal(5)
    # Sparse series (>= sparse_zero_share of the history's days at zero): a day is a spike when
    # it is >= sparse_factor x the largest day of the history and >= sparse_typical_factor x
    # its median non-zero day (a few active days tell little of how large the largest can be);
    # a burst (a level shift) when sparse_burst_days days in a row cost, each >= the history's
    # median non-zero day, and their sum >= sparse_factor x the history's largest sum of as
    # many days.
    sparse_rule: bool = True
    sparse_zero_share: Decimal = Decimal("0.3")
    sparse_factor: Decimal = Decimal(2)
    sparse_typical_factor: Decimal = Decimal("3.5")
    sparse_burst_days: int = 5
    # Ramps (new runs ramping up, ramp.py): when the ratios of the last `ramp_days` normal days
    # to their expected value rise along a line with a t-statistic >= ramp_t, the day's
    # expected value follows that line.
    ramp: bool = True
    ramp_days: int = 14
    ramp_t: Decimal = Decimal(2)
    # A ramp followed for at least this many days sets a new level when it ends.
    ramp_min_run: int = 5


@dataclass(frozen=True, slots=True)
class Accepted:
    """An event someone marked `expected`: its days are normal, and a level shift is the new
    baseline from its first day on."""

    first: dt.date
    last: dt.date
    kind: str


@dataclass(frozen=True, slots=True)
class DayFit:
    day: dt.date
    actual: Decimal | None
    expected: Decimal | None
    low: Decimal | None
    high: Decimal | None


@dataclass(slots=True)
class Event:
    kind: str
    first: dt.date
    last: dt.date
    # Money: sums over [first, last] of value x weight and expected x weight.
    actual: Decimal
    expected: Decimal
    # The day the event first cleared both floors (when it would have been reported).
    reported_on: dt.date
    ongoing: bool
    peak_z: Decimal

    @property
    def impact(self) -> Decimal:
        return self.actual - self.expected


@dataclass(slots=True)
class Detection:
    events: list[Event] = field(default_factory=list)
    fits: list[DayFit] = field(default_factory=list)
