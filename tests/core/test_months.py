"""finops.core.months: the one way a billing month is parsed, written and stepped."""

import datetime as dt
from argparse import ArgumentTypeError

import pytest

from finops.core.months import (
    month_add,
    month_argument,
    month_format,
    month_from_label,
    month_next,
    month_parse,
    month_previous,
    month_start,
)


def test_parse_gives_the_first_day_and_ignores_spaces() -> None:
    assert month_parse(" 2025-09 ") == dt.date(2025, 9, 1)


@pytest.mark.parametrize("text", ["2025-13", "2025", "09-2025", "", "2025-09-01"])
def test_parse_names_the_form_expected(text: str) -> None:
    with pytest.raises(ValueError, match=f"month must be YYYY-MM, not {text!r}"):
        month_parse(text)


@pytest.mark.parametrize("text", ["1969-12", "9999-01"])
def test_parse_refuses_years_out_of_range(text: str) -> None:
    with pytest.raises(ValueError, match="month must be between 1970-01 and 9998-12"):
        month_parse(text)


def test_argument_is_the_label_or_a_usage_error() -> None:
    assert month_argument("2025-9") == "2025-09"
    with pytest.raises(ArgumentTypeError, match="month must be YYYY-MM"):
        month_argument("September")


def test_label_round_trip() -> None:
    assert month_format(dt.date(2025, 9, 17)) == "2025-09"
    assert month_from_label("2025-09") == dt.date(2025, 9, 1)


def test_steps_cross_years_from_any_day() -> None:
    assert month_start(dt.date(2025, 3, 31)) == dt.date(2025, 3, 1)
    assert month_next(dt.date(2025, 12, 31)) == dt.date(2026, 1, 1)
    assert month_previous(dt.date(2025, 1, 15)) == dt.date(2024, 12, 1)
    assert month_add(dt.date(2025, 11, 1), 14) == dt.date(2027, 1, 1)
    assert month_add(dt.date(2025, 2, 28), -26) == dt.date(2022, 12, 1)
