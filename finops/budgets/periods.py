"""Budget periods: the month, fiscal quarter or fiscal year that contains a day. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from finops.core.months import MAX_YEAR, MIN_YEAR, month_add

MONTH = "month"
QUARTER = "quarter"
YEAR = "year"
_MONTHS = {MONTH: 1, QUARTER: 3, YEAR: 12}


def as_of_parse(text: str) -> date:
    """A day a person asked the budgets for (?as_of=): YYYY-MM-DD of the years MIN_YEAR to
    MAX_YEAR (a forecast window reaches back and forth from it: year 1 overflows). ValueError
    with the message to show."""
    try:
        day = date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError("Use YYYY-MM-DD.") from None
    if not MIN_YEAR <= day.year <= MAX_YEAR:
        raise ValueError(f"Use a day from {MIN_YEAR}-01-01 to {MAX_YEAR}-12-31.")
    return day


@dataclass(frozen=True)
class Period:
    """[start, end] both inclusive, whole days."""

    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def months(self) -> list[date]:
        """First days of the calendar months the period covers."""
        out = []
        month = self.start.replace(day=1)
        while month <= self.end:
            out.append(month)
            month = month_add(month, 1)
        return out

    def overlaps(self, first: date, last: date) -> bool:
        return self.start <= last and first <= self.end


def period_containing(*, kind: str, day: date, fiscal_year_start_month: int = 1) -> Period:
    """The month, quarter or year containing `day`; quarters and years start in the fiscal
    year's first month (1 = January)."""
    length = _MONTHS[kind]
    if length == 1:
        start = day.replace(day=1)
    else:
        # Months since the fiscal year's first month, rounded down to the period length.
        offset = (day.month - fiscal_year_start_month) % 12
        start = month_add(day.replace(day=1), -(offset % length))
    return Period(start=start, end=month_add(start, length) - timedelta(days=1))
