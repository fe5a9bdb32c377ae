"""The statement's energy figures (kWh, kg CO2e): read as people read them, 1 decimal from 10,
2 from 1, 3 below, with thousands separators (the CSV keeps the exact figure:
tests/chargeback/test_statement_economics.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from finops.web.templatetags.finops_tags import energy


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Decimal("12345.678912"), "12,345.7"),
        (Decimal("1234567.25"), "1,234,567.3"),  # half up
        (Decimal("10"), "10.0"),
        (Decimal("9.996"), "10.0"),  # rounds up into the next band
        (Decimal("9.994"), "9.99"),
        (Decimal("2.951"), "2.95"),
        (Decimal("0.587093"), "0.587"),
        (Decimal("0.9996"), "1.00"),
        (Decimal("0"), "0.000"),
        (Decimal("-0.0001"), "0.000"),  # never "-0"
        (Decimal("-15.25"), "-15.3"),
        (Decimal("1E+3"), "1,000.0"),  # no exponent
    ],
)
def test_energy_figures(value: Decimal, shown: str) -> None:
    assert energy(value) == shown


def test_no_figure_is_a_dash() -> None:
    assert energy(None) == "\u2013"
