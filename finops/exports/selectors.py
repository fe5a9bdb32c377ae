"""Reads of a billing month for the export: its settled line items, and one ServiceCategory per
ServiceName."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

from django.db.models import Count

from billing_ingest.models import CostLineItem
from finops.exports.columns import LINE_ITEM_FIELDS
from finops.exports.mapping import service_category_focus


def service_categories_for_month(month: date) -> dict[str, str]:
    """ServiceName -> the one ServiceCategory the export uses for it.

    FOCUS requires exactly one ServiceCategory per ServiceName, while exports (and the FOCUS
    sample files) sometimes disagree between rows or leave it blank: the most frequent allowed
    category of the month wins (ties: alphabetical), so every row of a service says the same.
    One aggregate query, not a pass over the rows.
    """
    counts = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .values_list("service_name", "service_category")
        .annotate(rows=Count("id"))
        .order_by()
    )
    votes: dict[str, dict[str, int]] = {}
    for name, stored, rows in counts:
        category = service_category_focus(stored)
        if category is not None:
            tally = votes.setdefault(name, {})
            tally[category] = tally.get(category, 0) + rows
    return {
        name: min(tally, key=lambda category: (-tally[category], category))
        for name, tally in votes.items()
    }


def line_items_for_month(month: date, chunk_size: int) -> Iterator[dict[str, Any]]:
    """The month's settled line items (LINE_ITEM_FIELDS) in id order, read in chunks."""
    return (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .order_by("pk")
        .values(*LINE_ITEM_FIELDS)
        .iterator(chunk_size=chunk_size)
    )
