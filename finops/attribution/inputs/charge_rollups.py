"""The budgets' rollups of a month (RecurringCharge, TagCharge), built from its settled line
items when the ledger is written, so budget pages and the API never read line items. A month
attributed in one process sums them as it reads its line items (ChargeSums, month.py); a
month attributed in parts reads the lines that can feed them once more (charge_rollups).

Both keep charge periods rather than days: a budget spreads an amount over the UTC days of its
period by seconds, which is linear in the amount, so spreading a sum of line items with one
period gives exactly the sum of spreading each (Fractions, no rounding).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q

from billing_ingest.models import CostLineItem
from finops.attribution.models import RecurringCharge, TagCharge
from finops.core.money import EXACT, MONEY_PLACES

_DAY = dt.timedelta(days=1)
_QUANTUM = Decimal(1).scaleb(-MONEY_PLACES)
_ZERO = Decimal(0)
_LINE_VALUES = (
    "charge_period_start", "charge_period_end", "provider_name", "billing_currency",
    "effective_cost", "charge_category", "sub_account_id", "tags",
)  # fmt: skip


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)


def tag_span(start: dt.datetime, end: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The period a line's tag cost is kept under: its UTC day when the period lies within one
    (spread by seconds, all of it lands on that day, and the budget's window filter keeps it
    exactly when it keeps the day), else the line's own period."""
    if start < end and start.date() == (end - dt.timedelta(microseconds=1)).date():
        return _midnight(start.date()), _midnight(start.date() + _DAY)
    return start, end


def _lines(month: dt.date, recurring_categories: frozenset[str]) -> Iterator[tuple[Any, ...]]:
    """The month's settled lines that can feed either rollup: a recurring category, or tags
    (most GPU node lines have none, and reading a row costs more than skipping it in SQL)."""
    rows = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .filter(Q(charge_category__in=recurring_categories) | ~Q(tags={}))
        .order_by()
    )
    yield from rows.values_list(*_LINE_VALUES).iterator(chunk_size=5000)


class ChargeSums:
    """The two rollups' sums, fed one line item at a time: by charge_rollups from its own read,
    or by attribution's read of the month's line items (month.py), which then saves reading
    them twice. A line feeds nothing unless wanted() says so (cheap enough to ask of every
    line)."""

    def __init__(self) -> None:
        self.recurring_categories = frozenset(settings.FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES)
        self._recurring: dict[tuple[Any, ...], Decimal] = {}
        self._tagged: dict[tuple[Any, ...], Decimal] = {}

    def wanted(self, category: str, tags: dict[str, object]) -> bool:
        return bool(tags) or category in self.recurring_categories

    def add(
        self, start: dt.datetime, end: dt.datetime, provider: str, currency: str, cost: Decimal,
        category: str, sub: str, tags: dict[str, object],
    ) -> None:  # fmt: skip
        """One line item (tags: its dict, {} when it has none)."""
        add = EXACT.add  # sums of money stay exact
        if category in self.recurring_categories and end - start >= _DAY and cost:
            key = (provider, sub, json.dumps(tags, sort_keys=True), currency, start, end)
            self._recurring[key] = add(self._recurring.get(key, _ZERO), cost)
        if tags:
            span = tag_span(start, end)
            for tag_key, value in tags.items():
                key = (tag_key, str(value), provider, currency, *span)
                self._tagged[key] = add(self._tagged.get(key, _ZERO), cost)

    def sums(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The recurring and tag sums as (key, amount) pairs (a part of a month sends them)."""
        return list(self._recurring.items()), list(self._tagged.items())

    def sums_add(
        self,
        recurring: list[tuple[tuple[Any, ...], Decimal]],
        tagged: list[tuple[tuple[Any, ...], Decimal]],
    ) -> None:
        """Add sums of other line items (another part's: sums()); exact, as add is."""
        for into, pairs in ((self._recurring, recurring), (self._tagged, tagged)):
            for key, amount in pairs:
                into[key] = EXACT.add(into.get(key, _ZERO), amount)

    def rows(self, month: dt.date) -> tuple[list[RecurringCharge], list[TagCharge]]:
        """The month's RecurringCharge and TagCharge rows (unsaved)."""
        return _recurring_rows(month, self._recurring), _tag_rows(month, self._tagged)


def charge_rollups(month: dt.date) -> tuple[list[RecurringCharge], list[TagCharge]]:
    """The month's RecurringCharge and TagCharge rows (unsaved), sums exact, from a read of
    the line items that can feed them."""
    sums = ChargeSums()
    for start, end, provider, currency, cost, category, sub, tags in _lines(
        month, sums.recurring_categories
    ):
        sums.add(
            start, end, provider, currency, cost, category, sub,
            tags if isinstance(tags, dict) else {},
        )  # fmt: skip
    return sums.rows(month)


def _recurring_rows(month: dt.date, sums: dict[tuple[Any, ...], Decimal]) -> list[RecurringCharge]:
    return [
        RecurringCharge(
            billing_period=month,
            provider_name=provider,
            sub_account_id=sub,
            tags=json.loads(tags),
            billing_currency=currency,
            charge_period_start=start,
            charge_period_end=end,
            amount=amount.quantize(_QUANTUM),
        )
        for (provider, sub, tags, currency, start, end), amount in sums.items()
    ]


def _tag_rows(month: dt.date, sums: dict[tuple[Any, ...], Decimal]) -> list[TagCharge]:
    return [
        TagCharge(
            billing_period=month,
            tag_key=tag_key,
            tag_value=value,
            provider_name=provider,
            billing_currency=currency,
            charge_period_start=start,
            charge_period_end=end,
            amount=amount.quantize(_QUANTUM),
        )
        for (tag_key, value, provider, currency, start, end), amount in sums.items()
    ]
