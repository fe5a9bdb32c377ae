"""Billing months, one vocabulary for every layer: a month is the date of its first day, written
"YYYY-MM". Pure (no ORM); it sits in finops/core, below every app, like money.py, so that
every app can use it.

- month_parse: what a person typed (a command option, a query parameter): strict, and only years
  MIN_YEAR..MAX_YEAR (year 0 does not exist, and readers step to the next month, which
  overflows in December 9999).
- month_from_label: a label this app wrote itself (ImportBatch.billing_periods): not checked.
"""

from __future__ import annotations

from argparse import ArgumentTypeError
from datetime import date, datetime

MONTH_FORMAT = "%Y-%m"
MIN_YEAR, MAX_YEAR = 1970, 9998
# What the API and its schema accept as a month: exactly the months month_parse takes, years
# MIN_YEAR..MAX_YEAR (1970..9998) in ASCII digits, so that a month the schema calls valid
# ("0000-01" matched the old \d{4}) is never refused. tests/core/test_months.py pins the two
# together.
MONTH_PATTERN = (
    r"^(19[7-9][0-9]|[2-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])-(0[1-9]|1[0-2])$"
)


def month_parse(text: str) -> date:
    """'YYYY-MM' (spaces around ignored) -> the first day of that month. ValueError saying the
    form expected, or the years allowed."""
    try:
        # Only the date is kept, so there is no time zone to lose (strptime is kept for what it
        # accepts: "2025-9" as well as "2025-09").
        month = datetime.strptime(text.strip(), MONTH_FORMAT).date()  # noqa: DTZ007
    except ValueError:
        raise ValueError(f"month must be YYYY-MM, not {text!r}") from None
    if not MIN_YEAR <= month.year <= MAX_YEAR:
        raise ValueError(f"month must be between {MIN_YEAR}-01 and {MAX_YEAR}-12")
    return month


def month_argument(text: str) -> str:
    """An argparse `type=` for --month: the month as 'YYYY-MM', or the parse error as the
    command's usage error."""
    try:
        return month_format(month_parse(text))
    except ValueError as exc:
        raise ArgumentTypeError(str(exc)) from None


def month_format(month: date) -> str:
    """The month holding `month` as 'YYYY-MM'."""
    return month.strftime(MONTH_FORMAT)


def month_from_label(label: str) -> date:
    """The first day of a 'YYYY-MM' label this app wrote (month_format)."""
    year, month = label.split("-")
    return date(int(year), int(month), 1)


def month_start(day: date) -> date:
    """The first day of the month holding `day`."""
    return day.replace(day=1)


def month_add(month: date, months: int) -> date:
    """The first day of the month `months` after (negative: before) the one holding `month`."""
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def month_next(month: date) -> date:
    """The first day of the month after the one holding `month`."""
    return month_add(month, 1)


def month_previous(month: date) -> date:
    """The first day of the month before the one holding `month`."""
    return month_add(month, -1)
