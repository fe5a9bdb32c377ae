"""The budgets' rollups of a month (RecurringCharge, TagCharge), built from its settled line
items when the ledger is written, so budget pages and the API never read line items.

Both keep charge periods rather than days: a budget spreads an amount over the UTC days of its
period by seconds, which is linear in the amount, so spreading a sum of line items with one
period gives exactly the sum of spreading each (Fractions, no rounding).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal, localcontext
from typing import Any

from django.conf import settings
from django.db.models import Q

from billing_ingest.models import MONEY_PLACES, CostLineItem
from finops.attribution.models import RecurringCharge, TagCharge

_DAY = dt.timedelta(days=1)
_QUANTUM = Decimal(1).scaleb(-MONEY_PLACES)
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


def _lines(month: dt.date, recurring_categories: set[str]) -> Iterator[tuple[Any, ...]]:
    """The month's settled lines that can feed either rollup: a recurring category, or tags
    (most GPU node lines have none, and reading a row costs more than skipping it in SQL)."""
    rows = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .filter(Q(charge_category__in=recurring_categories) | ~Q(tags={}))
        .order_by()
    )
    yield from rows.values_list(*_LINE_VALUES).iterator(chunk_size=5000)


def charge_rollups(month: dt.date) -> tuple[list[RecurringCharge], list[TagCharge]]:
    """The month's RecurringCharge and TagCharge rows (unsaved), sums exact."""
    recurring_categories = set(settings.FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES)
    recurring: dict[tuple[Any, ...], Decimal] = {}
    tagged: dict[tuple[Any, ...], Decimal] = {}
    with localcontext() as context:
        context.prec = 60  # sums of money stay exact
        for start, end, provider, currency, cost, category, sub, tags in _lines(
            month, recurring_categories
        ):
            tags = tags if isinstance(tags, dict) else {}
            if category in recurring_categories and end - start >= _DAY and cost:
                key = (provider, sub, json.dumps(tags, sort_keys=True), currency, start, end)
                recurring[key] = recurring.get(key, Decimal(0)) + cost
            if tags:
                span = tag_span(start, end)
                for tag_key, value in tags.items():
                    key = (tag_key, str(value), provider, currency, *span)
                    tagged[key] = tagged.get(key, Decimal(0)) + cost
    return _recurring_rows(month, recurring), _tag_rows(month, tagged)


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
