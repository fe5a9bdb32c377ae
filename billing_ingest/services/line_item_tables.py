"""Billing loads on partitioned line items (billing_ingest.loading.partitions, PostgreSQL): a part's
rows go to its loading table of their month, and the finish step's swap attaches the batch's
tables and drops the superseded ones. Used by services.billing."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

from billing_ingest.loading.partitions import (
    batch_partition_attach,
    month_batch_partitions,
    month_loading_tables,
    months_ensure,
    part_table_create,
    partitions_drop,
)
from billing_ingest.models import ImportBatch
from billing_ingest.parsers.rows import LineItemRow


class PartTables:
    """A part's table per month (partitions.part_table_create), created on first use."""

    def __init__(self, batch_id: int, index: int) -> None:
        self.batch_id = batch_id
        self.index = index
        self.names: dict[date, str] = {}

    def get(self, month: date) -> str:
        if month not in self.names:
            self.names[month] = part_table_create(
                month=month, batch_id=self.batch_id, index=self.index
            )
        return self.names[month]


def table_by_month(table: Any, tables: PartTables | None) -> Iterable[tuple[str | None, Any]]:
    if tables is None:
        yield None, table
        return
    import pyarrow.compute as pc

    column = table.column("billing_period")
    months = pc.unique(column).to_pylist()
    if len(months) == 1:  # the usual case: a file holds one billing month
        yield tables.get(months[0]), table
        return
    for month in months:
        yield tables.get(month), table.filter(pc.equal(column, month))


def rows_by_month(
    chunk: list[LineItemRow], tables: PartTables | None
) -> Iterable[tuple[str | None, list[LineItemRow]]]:
    if tables is None:
        yield None, chunk
        return
    by_month: dict[date, list[LineItemRow]] = {}
    for item in chunk:
        by_month.setdefault(item["billing_period"], []).append(item)
    for month, items in by_month.items():
        yield tables.get(month), items


def partitions_swap(batch: ImportBatch, *, periods: set[date]) -> set[int]:
    """Per month, in month order (one order for every swap: no deadlock between two): attach
    the batch's loaded tables as its partition, then drop the month's partitions of the
    source's other batches, and the tables their unfinished imports loaded (a batch left
    running: its rows were never the bill). Returns the other batches touched."""
    months_ensure(months=periods)
    touched: set[int] = set()
    for month in sorted(periods):
        batch_partition_attach(month=month, batch_id=batch.pk)
        partitions = month_batch_partitions(month=month)
        loading = month_loading_tables(month=month)
        others = ImportBatch.objects.filter(
            id__in=set(partitions) | set(loading), source=batch.source
        ).exclude(id=batch.pk)
        for batch_id in sorted(others.values_list("id", flat=True)):
            names = loading.get(batch_id, [])
            if batch_id in partitions:
                names = [partitions[batch_id], *names]
            partitions_drop(names)
            touched.add(batch_id)
    return touched
