"""The budget forecast (pure): run-rate before 14 days, day-of-week seasonality after, trend only
when significant, recurring charges once on their day, bill-lag days forecast (never zero), the
p10-p90 band; and the periods (month, fiscal quarter, fiscal year)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finops.budgets.forecast import ForecastInput, forecast_rest, run_rate_forecast
from finops.budgets.periods import period_containing

D = Decimal


def _input(
    history: Sequence[int | str | Decimal],
    *,
    complete: date,
    as_of: date | None = None,
    end: date,
    lag: dict[date, Decimal] | None = None,
    recurring: dict[date, Decimal] | None = None,
) -> ForecastInput:
    return ForecastInput(
        history=[D(v) for v in history],
        complete_through=complete,
        as_of=as_of or complete,
        period_end=end,
        lag_actuals=lag or {},
        recurring=recurring or {},
    )


def test_flat_history_forecasts_the_same_daily_amount_with_no_band() -> None:
    # 10 days of exactly 100: the rest of a 30-day month (20 days) is 2000, no spread at all.
    f = forecast_rest(_input([100] * 10, complete=date(2025, 9, 10), end=date(2025, 9, 30)))
    assert f.method == "run-rate"
    assert f.expected == D(2000)
    assert f.low == f.high == D(2000)


def test_weekday_seasonality_once_14_days_exist() -> None:
    # Weekdays 100, weekends 10 (Mon 2025-09-01 .. Sun 2025-09-14: 14 days, two whole weeks).
    start = date(2025, 9, 1)
    days = [start + timedelta(days=i) for i in range(14)]
    history = [10 if d.weekday() >= 5 else 100 for d in days]
    f = forecast_rest(_input(history, complete=days[-1], end=date(2025, 9, 30)))
    assert f.method.startswith("weekday")
    # 15..30 Sep: Mon 15 .. Tue 30 = 12 weekdays and 4 weekend days.
    assert f.expected == D(12 * 100 + 4 * 10)
    assert f.daily[date(2025, 9, 20)] == D(10)  # a Saturday
    assert f.daily[date(2025, 9, 22)] == D(100)  # a Monday


def test_13_days_are_still_run_rate() -> None:
    start = date(2025, 9, 1)
    history = [10 if (start + timedelta(days=i)).weekday() >= 5 else 100 for i in range(13)]
    f = forecast_rest(_input(history, complete=date(2025, 9, 13), end=date(2025, 9, 30)))
    assert f.method == "run-rate"
    mean = sum((D(v) for v in history), D(0)) / 13
    # 17 equal days, summed in 28-digit Decimal arithmetic.
    assert abs(f.expected - mean * 17) < D("1e-20")


def test_a_significant_trend_is_followed_and_noise_is_not() -> None:
    # Exactly linear growth 10, 11, ... : the forecast continues the line.
    history = [10 + i for i in range(10)]  # days 1..10 of September
    f = forecast_rest(_input(history, complete=date(2025, 9, 10), end=date(2025, 9, 12)))
    assert "trend" in f.method
    assert f.expected == D(20 + 21)

    # Alternating noise around 100 has no significant trend: forecast the mean.
    noisy = [90, 110, 95, 105, 100, 92, 108, 97, 103, 100]
    g = forecast_rest(_input(noisy, complete=date(2025, 9, 10), end=date(2025, 9, 12)))
    assert "trend" not in g.method
    assert g.expected == D(2) * sum(D(v) for v in noisy) / 10


def test_recurring_charges_count_once_on_their_day() -> None:
    # A 500 fee due on the 20th is added once, not spread or extrapolated.
    f = forecast_rest(
        _input(
            [100] * 10,
            complete=date(2025, 9, 10),
            end=date(2025, 9, 30),
            recurring={date(2025, 9, 20): D(500)},
        )
    )
    assert f.expected == D(20 * 100 + 500)
    assert f.daily[date(2025, 9, 20)] == D(600)
    assert f.daily[date(2025, 9, 21)] == D(100)


def test_bill_lag_days_are_forecast_never_zero() -> None:
    # Complete through the 10th; the 11th and 12th are lag days: 40 already booked on the 11th,
    # nothing on the 12th. Each lag day counts as the expected 100: +60 and +100. Then 18 days.
    f = forecast_rest(
        _input(
            [100] * 10,
            complete=date(2025, 9, 10),
            as_of=date(2025, 9, 12),
            end=date(2025, 9, 30),
            lag={date(2025, 9, 11): D(40)},
        )
    )
    assert f.expected == D(60 + 100 + 18 * 100)
    assert date(2025, 9, 12) not in f.daily
    assert date(2025, 9, 13) in f.daily


def test_band_widens_with_noise_and_contains_the_expected_value() -> None:
    quiet = forecast_rest(_input([99, 101] * 7, complete=date(2025, 9, 14), end=date(2025, 9, 30)))
    loud = forecast_rest(_input([50, 150] * 7, complete=date(2025, 9, 14), end=date(2025, 9, 30)))
    assert quiet.low < quiet.expected < quiet.high
    assert loud.high - loud.low > quiet.high - quiet.low
    # Symmetric normal band: p10 and p90 equally far from the expected sum.
    assert loud.expected - loud.low == loud.high - loud.expected


def test_no_history_forecasts_nothing_but_known_recurring() -> None:
    f = forecast_rest(
        _input(
            [],
            complete=date(2025, 9, 1),
            end=date(2025, 9, 30),
            recurring={date(2025, 9, 15): D(70)},
        )
    )
    assert f.expected == f.low == f.high == D(70)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=10_000), min_size=0, max_size=40),
    st.integers(min_value=0, max_value=25),
)
def test_band_is_ordered_and_never_negative(values: list[int], days_left: int) -> None:
    complete = date(2025, 10, 1)
    f = forecast_rest(_input(values, complete=complete, end=complete + timedelta(days=days_left)))
    assert D(0) <= f.low <= f.expected <= f.high


def test_run_rate_baseline() -> None:
    # 700 in 7 days of a 30-day month: 3000.
    assert run_rate_forecast(month_to_date=D(700), days_elapsed=7, days_in_period=30) == D(3000)


@pytest.mark.parametrize(
    ("kind", "day", "fiscal", "start", "end"),
    [
        ("month", date(2024, 2, 10), 1, date(2024, 2, 1), date(2024, 2, 29)),
        ("quarter", date(2025, 5, 3), 1, date(2025, 4, 1), date(2025, 6, 30)),
        ("quarter", date(2025, 5, 3), 2, date(2025, 5, 1), date(2025, 7, 31)),
        ("quarter", date(2025, 1, 15), 4, date(2025, 1, 1), date(2025, 3, 31)),
        ("quarter", date(2025, 3, 15), 4, date(2025, 1, 1), date(2025, 3, 31)),
        ("year", date(2025, 3, 15), 4, date(2024, 4, 1), date(2025, 3, 31)),
        ("year", date(2025, 4, 1), 4, date(2025, 4, 1), date(2026, 3, 31)),
        ("year", date(2025, 12, 31), 1, date(2025, 1, 1), date(2025, 12, 31)),
    ],
)
def test_periods(kind: str, day: date, fiscal: int, start: date, end: date) -> None:
    period = period_containing(kind=kind, day=day, fiscal_year_start_month=fiscal)
    assert (period.start, period.end) == (start, end)


# --- the band's calibration (issue 28) --------------------------------------------------------


def _noisy(level: int, days: int, seed: int) -> list[Decimal]:
    import random

    rng = random.Random(seed)
    return [D(f"{level * (1 + rng.gauss(0, 0.1)):.2f}") for _ in range(days)]


def test_band_after_a_level_change_is_widened_to_hold_the_month() -> None:
    # 50 days at 1,000 then 12 days at 2,000: the 56-day fit's own spread knows nothing of the
    # change; its errors on the last weeks do.
    history = _noisy(1000, 50, 1) + _noisy(2000, 12, 2)
    data = _input(history, complete=date(2025, 9, 10), end=date(2025, 9, 30))
    before = forecast_rest(data, calibrated=False)
    after = forecast_rest(data)
    assert after.expected == before.expected  # the band moves, not the forecast
    assert after.high - after.low > 2 * (before.high - before.low)
    # The rest of the month at the new level: 20 x 2,000 = 40,000, inside the calibrated band
    # only.
    assert not before.low <= D(40000) <= before.high
    assert after.low <= D(40000) <= after.high


def test_band_of_a_steady_series_stays_about_its_width() -> None:
    data = _input(_noisy(1000, 62, 3), complete=date(2025, 9, 10), end=date(2025, 9, 30))
    before = forecast_rest(data, calibrated=False)
    after = forecast_rest(data)
    ratio = (after.high - after.low) / (before.high - before.low)
    # Four backtests of a noisy series vary: this one calls for 1.5x (bench/forecast.py, 200
    # flat series: the band holds the month 77.5 % of the time, 74.8 % before).
    assert D("0.8") <= ratio <= D("1.6")


def _growing_history() -> list[Decimal]:
    # +6 a day from 1,000, noise sd 60: over the last 28 days the trend's t is about 2.7 (below
    # TREND_T), over the 56 days about 11.
    rng = random.Random(12)
    return [Decimal(f"{1000 + 6 * i + rng.gauss(0, 60):.2f}") for i in range(56)]


def test_a_weak_trend_the_longest_window_confirms_is_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from finops.budgets import forecast as module

    history = _growing_history()
    _, short_t = module._trend(history[-28:])
    assert Decimal(2) < short_t < module.TREND_T
    assert module._fit(history, 0, 28).method == "weekday+trend"
    # Without the longest window's support the 28 days are forecast flat.
    monkeypatch.setattr(module, "TREND_T_SUPPORTED", module.TREND_T)
    assert module._fit(history, 0, 28).method == "weekday"


def test_band_on_a_rising_trend_is_scaled_to_the_level_ahead() -> None:
    from finops.budgets.forecast import _Model, _noise_scale

    # Level 100 at the window's middle (index 27.5), +2 a day, the history's last day 55: the
    # next 10 days' middle is 27.5 + 5.5 = 33 days past the middle, at 166: 1.66 x the noise.
    model = _Model(
        level=Decimal(100),
        slope=Decimal(2),
        origin=Decimal("27.5"),
        offsets=(Decimal(0),) * 7,
        sigma=Decimal(10),
        level_se=Decimal(1),
        method="weekday+trend",
        last=Decimal(55),
    )
    assert _noise_scale(model, 10) == Decimal("1.66")
    # A falling trend keeps the window's spread.
    falling = _Model(**{**model.__dict__, "slope": Decimal(-2)})
    assert _noise_scale(falling, 10) == 1
