"""Reads: the periods (months) finance closes, and whether a month is closed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date

from finops.attribution.selectors.overview import month_list_with_data
from finops.chargeback.models import ClosedPeriod


def closes_active() -> dict[date, ClosedPeriod]:
    """Closed months -> their (not reopened) close."""
    return {c.month: c for c in ClosedPeriod.objects.filter(reopened_at__isnull=True)}


def month_is_closed(month: date) -> bool:
    return ClosedPeriod.objects.filter(
        month=month.replace(day=1), reopened_at__isnull=True
    ).exists()


@dataclass
class PeriodStatus:
    month: date
    close: ClosedPeriod | None
    # Every close of the month, newest first (reopened ones included).
    history: list[ClosedPeriod]

    @property
    def is_closed(self) -> bool:
        return self.close is not None


def period_list() -> list[PeriodStatus]:
    """Months with data or a close, newest first, each with its close history."""
    closes = list(ClosedPeriod.objects.select_related("closed_by", "reopened_by"))
    months = set(month_list_with_data()) | {c.month for c in closes}
    history: dict[date, list[ClosedPeriod]] = defaultdict(list)
    for close in closes:
        history[close.month].append(close)
    result = []
    for month in sorted(months, reverse=True):
        items = sorted(history[month], key=lambda c: c.closed_at, reverse=True)
        active = next((c for c in items if c.reopened_at is None), None)
        result.append(PeriodStatus(month=month, close=active, history=items))
    return result
