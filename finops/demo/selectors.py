"""Reads for the demo summary: what got ingested and how it was attributed."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost
from finops.demo.fleet import Month


@dataclass(frozen=True)
class DemoSummary:
    line_items: int
    billed: Decimal
    effective: Decimal
    jobs: int
    allocated: Decimal
    by_category: dict[str, Decimal] = field(default_factory=dict)

    @property
    def difference(self) -> Decimal:
        return self.effective - self.allocated


def _exact_sum(queryset: QuerySet[Any], field: str) -> Decimal:
    # SQLite SUM() over decimal columns is a float sum; add the stored Decimals in Python.
    return sum(queryset.values_list(field, flat=True).iterator(chunk_size=5000), Decimal(0))


def demo_summary(*, month: Month, clusters: list[str]) -> DemoSummary:
    """Totals of the month's current (non-superseded) line items, jobs and ledger."""
    period = month.start.date()
    items = CostLineItem.objects.filter(
        billing_period=period, batch__status=ImportBatch.Status.SUCCEEDED
    )
    ledger = AllocatedCost.objects.filter(billing_period=period)
    categories = sorted(set(ledger.values_list("category", flat=True).distinct()))
    by_category = {
        category: _exact_sum(ledger.filter(category=category), "amount") for category in categories
    }
    jobs = JobRecord.objects.filter(
        cluster__in=clusters, batch__status=ImportBatch.Status.SUCCEEDED
    ).count()
    return DemoSummary(
        line_items=items.count(),
        billed=_exact_sum(items, "billed_cost"),
        effective=_exact_sum(items, "effective_cost"),
        jobs=jobs,
        allocated=sum(by_category.values(), Decimal(0)),
        by_category=by_category,
    )
