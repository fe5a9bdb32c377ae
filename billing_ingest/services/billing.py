"""Billing file import: parse a batch's file, load its line items, swap out restated data.

One transaction holds the insert and the swap, so readers see either the previous good data or
the new file's, never a mix, and a failed import leaves nothing of itself behind (DESIGN 4).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from billing_ingest.copy_load import bulk_load, bulk_load_table
from billing_ingest.errors import ImportFormatError
from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers import billing_parser
from billing_ingest.parsers.values import LineItemTable
from billing_ingest.services.batches import import_batch_claim, import_batch_fail

logger = logging.getLogger("finops.billing_ingest")

_SOURCE_SUFFIXES = (".gz", ".csv", ".parquet")


def billing_default_source(*, format: str, path: Path) -> str:
    """`<format>:<file name without .csv/.gz/.parquet suffixes>`, e.g. focus:acme-2024-09 for
    acme-2024-09.csv.gz. One source per file means files never restate each other unless the
    caller names a shared source on purpose."""
    name = path.name
    stripped = True
    while stripped:
        stripped = False
        for suffix in _SOURCE_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                stripped = True
    return f"{format}:{name}"


def billing_file_wanted(path: Path) -> bool:
    """Whether a file found in a folder looks like billing data (.csv, .gz, .parquet), so that
    manifests, notes and reports sitting beside the exports are skipped."""
    return any(suffix.lower() in _SOURCE_SUFFIXES for suffix in path.suffixes[-2:])


class _Totals:
    """Row count, billing periods and per-currency sums, accumulated chunk by chunk."""

    def __init__(self) -> None:
        self.rows = 0
        self.periods: set[date] = set()
        self.currencies: dict[str, dict[str, Any]] = {}

    def add(self, items: Iterable[dict[str, Any]]) -> None:
        for item in items:
            self.rows += 1
            self.periods.add(item["billing_period"])
            totals = self.currencies.setdefault(
                item["billing_currency"],
                {"billed": Decimal(0), "effective": Decimal(0), "rows": 0},
            )
            totals["billed"] += item["billed_cost"]
            totals["effective"] += item["effective_cost"]
            totals["rows"] += 1

    def add_table(self, table: Any) -> None:
        """add() for a columnar chunk: the same sums, taken by pyarrow (exact decimal sums)."""
        import pyarrow.compute as pc

        self.rows += table.num_rows
        self.periods.update(pc.unique(table.column("billing_period")).to_pylist())
        grouped = table.group_by("billing_currency").aggregate(
            [("billed_cost", "sum"), ("effective_cost", "sum"), ("billed_cost", "count")]
        )
        for row in grouped.to_pylist():
            totals = self.currencies.setdefault(
                row["billing_currency"],
                {"billed": Decimal(0), "effective": Decimal(0), "rows": 0},
            )
            totals["billed"] += row["billed_cost_sum"]
            totals["effective"] += row["effective_cost_sum"]
            totals["rows"] += row["billed_cost_count"]

    def as_json(self) -> dict[str, dict[str, Any]]:
        return {
            currency: {
                # Fixed-point text: "0.000000000000", never "0E-12".
                "billed": f"{totals['billed']:f}",
                "effective": f"{totals['effective']:f}",
                "rows": totals["rows"],
            }
            for currency, totals in sorted(self.currencies.items())
        }

    def period_labels(self) -> list[str]:
        return [period.strftime("%Y-%m") for period in sorted(self.periods)]


def billing_batch_ingest(*, batch_id: int) -> ImportBatch:
    """Run one pending billing batch to SUCCEEDED or FAILED and return it.

    Idempotent: a batch that is not pending (already run, running elsewhere, or a duplicate) is
    returned unchanged. Import errors never raise: they are recorded on the batch, whose error
    names file, row and column, because the caller (a task on a remote worker) must not lose them.
    """
    if not import_batch_claim(batch_id=batch_id):
        return ImportBatch.objects.get(id=batch_id)
    batch = ImportBatch.objects.get(id=batch_id)
    path = Path(batch.file_name)
    try:
        _ingest(batch, path)
    except ImportFormatError as exc:
        import_batch_fail(batch_id=batch_id, error=str(exc))
    except Exception as exc:  # anything else still fails the batch, with the reason kept
        logger.exception("billing batch %s failed", batch_id)
        import_batch_fail(batch_id=batch_id, error=f"file {path.name}: {type(exc).__name__}: {exc}")
    batch.refresh_from_db()
    return batch


def _ingest(batch: ImportBatch, path: Path) -> None:
    parse = billing_parser(batch.format)
    totals = _Totals()
    with transaction.atomic():
        for chunk in parse(path, file_label=path.name):
            if isinstance(chunk, LineItemTable) and connection.vendor == "postgresql":
                # Columnar chunk: one COPY and pyarrow sums, no Python work per row.
                constants = {"batch_id": batch.pk, "source": batch.source}
                bulk_load_table(CostLineItem, chunk.table, constants=constants)
                totals.add_table(chunk.table)
                continue
            for item in chunk:
                item["batch_id"] = batch.pk
                item["source"] = batch.source
            bulk_load(CostLineItem, chunk)
            totals.add(chunk)
        _lock_source(batch.source)
        _supersede(batch, periods=totals.periods)
        batch.status = ImportBatch.Status.SUCCEEDED
        batch.row_count = totals.rows
        batch.billing_periods = totals.period_labels()
        batch.currency_totals = totals.as_json()
        batch.error = ""
        batch.finished_at = timezone.now()
        batch.save(
            update_fields=[
                "status",
                "row_count",
                "billing_periods",
                "currency_totals",
                "error",
                "finished_at",
            ]
        )


def _lock_source(source: str) -> None:
    """Serialise the swap per source on PostgreSQL, so two restatements finishing together
    cannot each keep their own rows. SQLite already serialises every write transaction."""
    if connection.vendor != "postgresql":
        return
    key = int.from_bytes(hashlib.sha256(source.encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def _supersede(batch: ImportBatch, *, periods: set[date]) -> None:
    """Delete the source's other rows for the file's billing periods; a batch left with no rows
    is marked SUPERSEDED by this one. Periods the file does not hold are left alone."""
    replaced = CostLineItem.objects.filter(source=batch.source, billing_period__in=periods).exclude(
        batch_id=batch.pk
    )
    touched = set(replaced.values_list("batch_id", flat=True).distinct())
    if not touched:
        return
    replaced.delete()
    emptied = ImportBatch.objects.filter(id__in=touched).exclude(
        id__in=CostLineItem.objects.filter(batch_id__in=touched).values("batch_id")
    )
    emptied.update(status=ImportBatch.Status.SUPERSEDED, superseded_by=batch)
