"""The pure detector on hand-made series: each kind of event, the 14-day rule, both impact
floors, growth that must not alert, a level shift marked expected becoming the new baseline,
recurring month-start fees, and the drivers' exact split (hypothesis)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from finops.anomalies.detector import (
    LEVEL_SHIFT,
    SPIKE,
    Accepted,
    DetectorSettings,
    detect,
)
from finops.anomalies.expected_value import fit_day
from finops.anomalies.findings import allocate, split_drivers
from finops.anomalies.new_sources import new_sources

START = dt.date(2025, 9, 1)  # a Monday
D = Decimal
# Noise that repeats every 5 days (so never in step with the week): +-3 %.
WIGGLE = [D("1.00"), D("1.03"), D("0.98"), D("1.02"), D("0.97")]


def days(n: int) -> list[dt.date]:
    return [START + dt.timedelta(days=i) for i in range(n)]


def flat(n: int, level: str = "1000") -> list[Decimal | None]:
    return [D(level) * WIGGLE[i % 5] for i in range(n)]


def test_a_quiet_series_has_no_event() -> None:
    assert detect(days(60), flat(60)).events == []


def test_one_day_spike_is_a_spike_with_its_actual_and_expected() -> None:
    values = flat(40)
    values[30] = D("3000")
    [event] = detect(days(40), values).events
    assert event.kind == SPIKE
    assert event.first == event.last == START + dt.timedelta(days=30)
    assert event.actual == D("3000")
    # Expected sits in the series' +-3 % band around 1000.
    assert D("970") <= event.expected <= D("1030")
    assert event.impact == event.actual - event.expected
    assert not event.ongoing


def test_nothing_is_flagged_in_the_first_14_days() -> None:
    values = flat(40)
    values[10] = D("5000")  # day 11 of the series: warm-up
    assert detect(days(40), values).events == []
    values[10] = values[0]
    values[14] = D("5000")  # the 15th day: 14 days of history exist
    [event] = detect(days(40), values).events
    assert event.first == START + dt.timedelta(days=14)


def test_history_starts_with_the_series_first_cost() -> None:
    # 20 empty days, then a series: its own 14 days of warm-up count from its first cost.
    values: list[Decimal | None] = [D(0) for _ in range(20)]
    values += flat(20)
    values[20 + 10] = D("5000")
    assert detect(days(40), values).events == []


def test_money_floor_keeps_small_series_quiet() -> None:
    values = flat(40, "100")
    values[30] = D("190")  # +90 %, but only ~90 in money (floor 100)
    assert detect(days(40), values).events == []
    values[30] = D("210")  # +110 in money
    assert len(detect(days(40), values).events) == 1


def test_percent_floor_keeps_large_series_quiet() -> None:
    values = [D("100000")] * 40  # no noise: the smallest change is many sigmas
    values[30] = D("115000")  # +15,000 in money, but only +15 % (floor 20 %)
    assert detect(days(40), values).events == []
    values[30] = D("121000")  # +21 %
    assert len(detect(days(40), values).events) == 1


def test_the_floors_are_settings() -> None:
    values = flat(40)
    values[30] = D("1600")  # +600, +60 %
    strict = DetectorSettings(min_impact=D("1000"))
    assert detect(days(40), values, settings=strict).events == []
    strict = DetectorSettings(min_percent=D("80"))
    assert detect(days(40), values, settings=strict).events == []


def test_level_shift_is_one_event_extended_until_it_ends() -> None:
    values = flat(70)
    for i in range(30, 50):
        values[i] = D("2000") * WIGGLE[i % 5]
    [event] = detect(days(70), values).events
    assert event.kind == LEVEL_SHIFT
    assert event.first == START + dt.timedelta(days=30)
    assert event.last == START + dt.timedelta(days=49)
    assert not event.ongoing
    # Reported on its first day (+1000 clears both floors at once).
    assert event.reported_on == event.first


def test_level_shift_still_going_is_ongoing_and_grows_day_by_day() -> None:
    values = flat(45)
    for i in range(30, 45):
        values[i] = D("2000") * WIGGLE[i % 5]
    [shorter] = detect(days(40), values[:40]).events
    [longer] = detect(days(45), values).events
    assert shorter.ongoing
    assert longer.ongoing
    assert shorter.first == longer.first
    assert longer.last == shorter.last + dt.timedelta(days=5)


def test_marked_expected_level_shift_becomes_the_new_baseline() -> None:
    values = flat(80)
    for i in range(30, 80):
        values[i] = D("2000") * WIGGLE[i % 5]
    accepted = Accepted(START + dt.timedelta(days=30), START + dt.timedelta(days=33), LEVEL_SHIFT)
    detection = detect(days(80), values, accepted=[accepted])
    assert detection.events == []
    # And the days after it are expected at the new level.
    last = detection.fits[-1]
    assert last.expected is not None
    assert D("1900") <= last.expected <= D("2100")


def test_gradual_growth_does_not_alert() -> None:
    # +1.5 % of the start level a day: x2.3 over 90 days, with the +-3 % wiggle.
    values = [D("1000") * (1 + D("0.015") * i) * WIGGLE[i % 5] for i in range(90)]
    assert detect(days(90), values).events == []


def test_weekly_seasonality_does_not_alert_but_a_busy_weekend_does() -> None:
    weekend = D("0.4")
    values = [
        D("1000") * WIGGLE[i % 5] * (weekend if d.weekday() >= 5 else 1)
        for i, d in enumerate(days(63))
    ]
    assert detect(days(63), values).events == []
    saturday = next(i for i, d in enumerate(days(63)) if i > 40 and d.weekday() == 5)
    values[saturday] = D("1000")  # a weekday's cost on a Saturday: +150 % over ~400
    [event] = detect(days(63), values).events
    assert event.first == START + dt.timedelta(days=saturday)


def test_month_start_fee_seen_in_warm_up_is_learnt() -> None:
    start = dt.date(2025, 8, 20)
    series_days = [start + dt.timedelta(days=i) for i in range(75)]
    values = [D("1000") * WIGGLE[i % 5] for i in range(75)]
    for i, d in enumerate(series_days):
        if d.day == 1:
            values[i] += D("1500")
    assert detect(series_days, values).events == []


def test_no_values_days_are_skipped() -> None:
    values = flat(40)
    values[20] = None
    values[30] = D("3000")
    [event] = detect(days(40), values).events
    assert event.first == START + dt.timedelta(days=30)


def test_weights_turn_a_rate_into_money() -> None:
    # Cost per 1,000 requests doubles on day 30; 50,000 requests a day (weight 50).
    values = [D("4.00")] * 40
    values[30] = D("8.00")
    weights = [D(50)] * 40
    [event] = detect(days(40), values, weights=weights).events
    assert event.actual == D("400.00")
    assert event.expected == D("200.00")


def test_new_source_after_warm_up_costing_above_floor() -> None:
    cells: dict[dt.date, dict[tuple[str, str, str], Decimal]] = {}
    for i, d in enumerate(days(40)):
        cells[d] = {("EC2", "", ""): D("500")}
        if i >= 30:
            cells[d][("SageMaker", "ml.p5", "ep-1")] = D("60")  # new service: 60 a day
        if i >= 33:
            cells[d][("EC2", "p5.48xlarge", "node-9")] = D("10")  # new SKU, too small
    [event] = new_sources(cells, series_start=START)
    assert event.first == START + dt.timedelta(days=30)
    # The new service's SKU and resource are the service's (never counted twice); EC2's new
    # SKU costs 7 x 10 = 70 over its first 7 days: under the floor of 100.
    assert event.sources == {("service", "SageMaker"): D("60") * 7}


def test_sources_first_seen_in_warm_up_are_not_new() -> None:
    cells = {d: {("EC2", "", ""): D("500")} for d in days(30)}
    cells[START + dt.timedelta(days=5)][("S3", "", "")] = D("900")
    assert new_sources(cells, series_start=START) == []


def test_drivers_name_the_cell_that_changed() -> None:
    actual = {("run", "a"): D("500"), ("run", "b"): D("2500"), ("service", "S3"): D("100")}
    baseline = {("run", "a"): D("5000"), ("service", "S3"): D("1000")}
    drivers, unexplained = split_drivers(actual, baseline, D("600"))
    assert drivers[0].dimension == "run"
    assert drivers[0].key == "b"
    assert drivers[0].expected == 0
    assert drivers[0].delta == D("2500")
    assert sum(d.delta for d in drivers) + unexplained == D("3100") - D("600")


money_values = st.decimals(
    min_value=D("-1000"), max_value=D("100000"), places=2, allow_nan=False, allow_infinity=False
)
cells = st.dictionaries(
    st.tuples(
        st.sampled_from(["service", "run", "resource", "endpoint"]),
        st.text("abcdef", min_size=1, max_size=3),
    ),
    money_values,
    max_size=25,
)


@given(actual=cells, baseline=cells, expected=money_values, limit=st.integers(1, 12))
def test_drivers_plus_unexplained_equal_the_impact_exactly(
    actual: dict[tuple[str, str], Decimal],
    baseline: dict[tuple[str, str], Decimal],
    expected: Decimal,
    limit: int,
) -> None:
    drivers, unexplained = split_drivers(actual, baseline, expected, limit=limit)
    assert len(drivers) <= limit
    assert (
        sum((d.delta for d in drivers), D(0)) + unexplained == sum(actual.values(), D(0)) - expected
    )
    deltas = [abs(d.delta) for d in drivers]
    assert deltas == sorted(deltas, reverse=True)


@given(
    total=money_values,
    weights=st.lists(st.decimals(min_value=0, max_value=10**6, places=3), min_size=1, max_size=20),
)
def test_allocate_sums_to_the_total_when_any_weight_is_positive(
    total: Decimal, weights: list[Decimal]
) -> None:
    shares = allocate(total, weights)
    if any(w > 0 for w in weights):
        assert sum(shares, D(0)) == total
    assert all(s == 0 for s, w in zip(shares, weights, strict=True) if w <= 0)


def test_the_trend_is_fitted_from_a_history_given_newest_first() -> None:
    # The detector passes its history newest first: 28 days of 1,000 + 10 a day, no noise. The
    # weekday factors are read from the rising values (the day after, a Monday, is the oldest of
    # its week: it looks about 2 % low), so the slope and the expected value are near 10 and
    # 1,280, not exactly; with no trend they were 0 and 1,114.
    positions = list(range(27, -1, -1))
    values = [D(1000 + 10 * p) for p in positions]
    weekdays = [(START + dt.timedelta(days=p)).weekday() for p in positions]
    fit = fit_day(positions, values, weekdays, 28, (START + dt.timedelta(days=28)).weekday())
    assert fit is not None
    assert D(9) <= fit.slope <= D(11)
    assert D(1240) <= fit.expected <= D(1300)  # 1,000 + 10 x 28 = 1,280
