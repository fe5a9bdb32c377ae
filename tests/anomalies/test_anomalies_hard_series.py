"""The detector on the shapes real teams have (issue 28): month-end load is learnt, a late bill
or a catch-up day is set against the shortfall before it, a price cut becomes the new level, and
a sparse team (cost on one day in four) gets a rule of its own. Each test also runs the detector
with its rule off, to show the series is one the rule is needed for."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

from finops.anomalies.detector import LEVEL_SHIFT, SPIKE, DetectorSettings, Event, detect

START = dt.date(2025, 9, 20)
DAYS = 91


def _days() -> list[dt.date]:
    return [START + dt.timedelta(days=i) for i in range(DAYS)]


def _flat(seed: int, level: float = 1000.0, noise: float = 0.04) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, noise)) for _ in range(DAYS)]


def _run(values: list[float], **rules: bool) -> list[Event]:
    decimals: list[Decimal | None] = [Decimal(f"{v:.2f}") for v in values]
    return detect(_days(), decimals, settings=DetectorSettings(**rules)).events  # type: ignore[arg-type]


def _index(day: dt.date) -> int:
    return (day - START).days


def test_month_end_load_is_learnt_from_the_month_before() -> None:
    values = _flat(1)
    for i, day in enumerate(_days()):
        if (day + dt.timedelta(days=2)).day <= 2:  # the last two days of each month
            values[i] *= 2.5

    assert _run(values) == []
    # Without the rule the 30th and 31st of October (the 31st has no twin on 30 September,
    # and the 30th's twin was a normal day) are alerted.
    assert _run(values, month_end=False) != []


def test_a_bill_booked_a_day_late_is_not_a_spike_but_a_spike_after_it_is() -> None:
    values = _flat(2)
    late = _index(dt.date(2025, 10, 29))
    values[late + 1] += values[late] * 0.9
    values[late] *= 0.1
    spike = _index(dt.date(2025, 11, 20))
    values[spike] *= 2

    (event,) = _run(values)
    assert (event.kind, event.first) == (SPIKE, dt.date(2025, 11, 20))
    assert [e.first for e in _run(values, catch_up=False)] == [
        dt.date(2025, 10, 30),
        dt.date(2025, 11, 20),
    ]


def test_after_a_price_cut_the_new_level_is_the_baseline() -> None:
    values = _flat(3, noise=0.03)
    cut = _index(dt.date(2025, 10, 25))
    values[cut:] = [v * 0.5 for v in values[cut:]]
    # +40 % on the new level: 700 a day, below the old level of 1,000.
    shift = _index(dt.date(2025, 11, 20))
    values[shift : shift + 10] = [v * 1.4 for v in values[shift : shift + 10]]

    (event,) = _run(values)
    assert (event.kind, event.first) == (LEVEL_SHIFT, dt.date(2025, 11, 20))
    assert _run(values, adapt_level=False) == []


def _sparse(seed: int) -> list[float]:
    rng = random.Random(seed)
    return [1000 * (1 + rng.gauss(0, 0.3)) if rng.random() < 0.25 else 0.0 for _ in range(DAYS)]


def test_a_sparse_team_is_quiet_on_its_ordinary_days_and_alerted_on_a_real_spike() -> None:
    values = _sparse(4)
    assert _run(values) == []
    assert len(_run(values, sparse_rule=False)) > 3

    day = _index(dt.date(2025, 11, 15))
    values[day] = 8000.0
    (event,) = _run(values)
    assert (event.kind, event.first) == (SPIKE, dt.date(2025, 11, 15))
    assert event.impact >= Decimal(6000)


def test_a_sparse_team_suddenly_busy_every_day_is_a_level_shift() -> None:
    values = _sparse(5)
    first = _index(dt.date(2025, 11, 10))
    values[first : first + 10] = [2000.0] * 10

    events = _run(values)
    assert [(e.kind, e.first, e.last) for e in events] == [
        (LEVEL_SHIFT, dt.date(2025, 11, 10), dt.date(2025, 11, 19))
    ]


def _ramp(values: list[float], first: int, length: int, top: float) -> None:
    for i in range(first, DAYS):
        values[i] *= 1 + (top - 1) * min(1.0, (i - first + 1) / length)


def test_new_runs_ramping_up_are_followed_and_a_spike_after_the_ramp_is_alerted() -> None:
    values = _flat(6)
    _ramp(values, _index(dt.date(2025, 10, 20)), 21, 2.2)  # to 2,200 a day by 9 November
    spike = _index(dt.date(2025, 12, 1))
    values[spike] *= 1.6

    (event,) = _run(values)
    assert (event.kind, event.first) == (SPIKE, dt.date(2025, 12, 1))
    # Without the rule the ramp is alerted, and its history leaves the spike unseen.
    without = [e.first for e in _run(values, ramp=False)]
    assert dt.date(2025, 12, 1) not in without
    assert without != []


def test_a_step_up_is_still_a_level_shift_on_its_first_day() -> None:
    values = _flat(7)
    first = _index(dt.date(2025, 11, 5))
    values[first:] = [v * 1.5 for v in values[first:]]

    (event,) = _run(values)
    assert (event.kind, event.first) == (LEVEL_SHIFT, dt.date(2025, 11, 5))


def test_month_end_load_learnt_on_a_weekend_is_a_factor_of_a_weekday() -> None:
    # Weekends at 60 %; 30 and 31 August 2025 are a Saturday and a Sunday, 29 and 30 September
    # a Monday and a Tuesday: the load (x 2.5) learnt on the weekend is larger on weekdays.
    start = dt.date(2025, 8, 20)
    rng = random.Random(8)
    days = [start + dt.timedelta(days=i) for i in range(61)]
    values = []
    for day in days:
        value = 1000 * (0.6 if day.weekday() >= 5 else 1.0) * (1 + rng.gauss(0, 0.03))
        if (day + dt.timedelta(days=2)).day <= 2:
            value *= 2.5
        values.append(Decimal(f"{value:.2f}"))

    def run(**rules: bool) -> list[Event]:
        return detect(days, list(values), settings=DetectorSettings(**rules)).events  # type: ignore[arg-type]

    assert run() == []
    assert run(month_end=False) != []


def test_a_steady_growth_is_the_trend_and_a_spike_on_it_is_alerted() -> None:
    # +1 % of the start level a day (x1.9 over the 91 days), 3 % noise, a day at +35 %, on six
    # noise draws. Before the trend was fitted (its pairs were skipped: the slope was always 0)
    # four of these six were a level shift weeks early or nothing at all.
    spike = _index(dt.date(2025, 11, 22))
    for seed in range(1, 7):
        rng = random.Random(seed)
        values = [1000 * (1 + 0.01 * i) * (1 + rng.gauss(0, 0.03)) for i in range(DAYS)]
        values[spike] *= 1.35

        (event,) = _run(values)
        assert (event.kind, event.first) == (SPIKE, dt.date(2025, 11, 22)), seed
        # The day's expected value follows the trend: 1,000 x (1 + 0.01 x 63) = 1,630.
        assert Decimal(1500) <= event.expected <= Decimal(1760), seed


def test_a_sparse_team_with_few_active_days_is_not_alerted_on_an_ordinary_large_one() -> None:
    # Five active days of 900-1,100 in the first weeks, then one of 3,000: twice the largest
    # (2,200) but only 3x the median active day (1,000), as a team's larger days are; 4,000 is.
    values = [0.0] * DAYS
    for day, value in zip((2, 6, 11, 15, 19), (1000.0, 900.0, 1100.0, 1000.0, 1050.0), strict=True):
        values[day] = value
    values[40] = 3000.0
    assert _run(values) == []
    decimals: list[Decimal | None] = [Decimal(f"{v:.2f}") for v in values]
    settings = DetectorSettings(sparse_typical_factor=Decimal(2))  # the rule before: alerted
    (event,) = detect(_days(), decimals, settings=settings).events
    assert (event.kind, event.first) == (SPIKE, START + dt.timedelta(days=40))
    values[40] = 4000.0
    (event,) = _run(values)
    assert (event.kind, event.first) == (SPIKE, START + dt.timedelta(days=40))
