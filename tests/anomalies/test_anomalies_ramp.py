"""The ramp rule's line (finops/anomalies/ramp.py), on hand-computed points."""

from __future__ import annotations

from decimal import Decimal

from finops.anomalies.ramp import ramp_factor

T = Decimal(2)


def _points(ratios: list[str]) -> list[tuple[int, Decimal]]:
    return [(i, Decimal(r)) for i, r in enumerate(ratios)]


def test_a_steady_rise_is_extrapolated_to_the_day() -> None:
    # 1.00, 1.05, ... 1.30 over positions 0..6: slope 0.05, so position 7 is 1.35.
    points = _points(["1.00", "1.05", "1.10", "1.15", "1.20", "1.25", "1.30"])
    assert ramp_factor(points, 7, min_t=T) == Decimal("1.35")


def test_a_noisy_rise_is_a_ramp_when_significant() -> None:
    # Slope (median of pairwise slopes) 0.05; least-squares residuals small: t far above 2.
    points = _points(["1.01", "1.04", "1.11", "1.14", "1.21", "1.24", "1.31"])
    factor = ramp_factor(points, 7, min_t=T)
    assert factor is not None
    assert Decimal("1.33") <= factor <= Decimal("1.37")


def test_flat_ratios_two_high_days_at_the_end_or_a_fall_are_no_ramp() -> None:
    assert ramp_factor(_points(["1.0"] * 10), 10, min_t=T) is None
    # Month-end load: two days at 2.5x after eight flat ones; the median slope is 0.
    assert ramp_factor(_points(["1.0"] * 8 + ["2.5", "2.5"]), 10, min_t=T) is None
    assert ramp_factor(_points(["1.3", "1.25", "1.2", "1.15", "1.1", "1.05"]), 6, min_t=T) is None


def test_a_rise_still_below_the_expected_value_is_no_ramp() -> None:
    # Recovering towards 1 (after a dip): rising, but it ends at 0.98, not above 1.
    points = _points(["0.80", "0.83", "0.86", "0.89", "0.92", "0.95", "0.98"])
    assert ramp_factor(points, 7, min_t=T) is None


def test_fewer_than_five_points_are_not_judged() -> None:
    assert ramp_factor(_points(["1.0", "1.1", "1.2", "1.3"]), 4, min_t=T) is None
