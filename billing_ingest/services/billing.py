"""Billing import: one batch per delivery, one load per part, one atomic swap at the end.

A delivery (a file, or the N parts of one export month) is ONE ImportBatch with N
ImportBatchPart rows. The batch is RUNNING while its parts load; each part is parsed and COPYed
under the batch id in its own transaction (billing_part_ingest, one Celery task each). Rows of a
RUNNING batch are invisible: attribution and reconciliation read SUCCEEDED batches only. The
finish step (billing_batch_finish, the chord callback) then, in ONE transaction, either swaps the
batch in (deletes the source's other rows for the batch's billing periods, supersedes emptied
batches, marks it SUCCEEDED with the parts' summed totals) or, if any part failed, deletes the
batch's own rows and marks it FAILED with that part's error: the previous data is untouched.
On PostgreSQL those are partition operations (billing_ingest.loading.partitions): a part COPYs into
loading tables of its own, the swap attaches them as the batch's partitions and drops the
superseded batches' partitions, and deleting a batch's rows drops its tables.

Interrupted imports: a worker killed mid-part rolls its transaction back (the part stays
PENDING; acks_late redelivers it). While a part loads, a heartbeat thread touches the batch; a
RUNNING batch whose heartbeat stopped is failed by whoever looks first (the waiting command, the
watchdog: services.batches.import_batch_fail_if_dead), its rows deleted, the previous data kept.
A lost database connection is not the file's fault: the part stays PENDING and the task retries.
A batch left RUNNING for good (its messages lost, or the
process running an eager import killed) holds invisible rows; importing the same delivery again
abandons it (rows deleted, status FAILED, see billing_batch_create), and any later swap of the
same source deletes its rows in the periods swapped.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from billing_ingest.loading.copy_load import bulk_load, bulk_load_table
from billing_ingest.loading.partitions import batch_tables, line_items_partitioned
from billing_ingest.loading.prefetch import prefetched
from billing_ingest.loading.read_ahead import read_before_writing, writers_queue
from billing_ingest.loading.statistics import tables_analyze_if_changed
from billing_ingest.models import CostLineItem, ImportBatch, ImportBatchPart, MonthChange
from billing_ingest.parsers import DATABASE_FREE_PARSERS, billing_parser
from billing_ingest.parsers.columnar import LineItemTable
from billing_ingest.parsers.rows import LineItemRow
from billing_ingest.services.batches import (
    file_sha256,
    import_batch_claim,
    import_batch_record,
    import_batch_touch,
    line_items_batch_delete,
)
from billing_ingest.services.billing_totals import _Totals
from billing_ingest.services.line_item_tables import (
    PartTables,
    partitions_swap,
    rows_by_month,
    table_by_month,
)
from billing_ingest.services.months import month_changes_record
from finops.core.errors import ImportFormatError
from finops.core.faults import fault_point
from finops.core.heartbeat import heartbeat

logger = logging.getLogger("finops.billing_ingest")


@dataclass(frozen=True)
class BillingFile:
    """A local file to load as one part of a batch, and the name its errors give it (the
    remote key of an export part, or the local file name)."""

    path: Path
    label: str


def _delivery_sha256(files: list[BillingFile]) -> str:
    """The file's sha256; for several parts, the sha256 of their sha256s in order, so the same
    delivery imported again is recognised as a duplicate."""
    shas = [file_sha256(file.path) for file in files]
    if len(shas) == 1:
        return shas[0]
    return hashlib.sha256("\n".join(shas).encode()).hexdigest()


def billing_batch_create(
    *, format: str, source: str, files: list[BillingFile], name: str | None = None
) -> ImportBatch:
    """Record one delivery to import: a PENDING batch and one PENDING part per file.

    ``name`` (default: the single file's path) is the batch's file_name, e.g. the manifest URI.
    The same bytes already imported for this source make a DUPLICATE batch that never runs.
    An earlier import of the same bytes that never finished (still PENDING or RUNNING: its
    process or messages were lost) is abandoned here, its invisible rows deleted, because this
    import does the same work again."""
    if not files:
        raise ValueError("a billing batch needs at least one file")
    sha = _delivery_sha256(files)
    same = ImportBatch.objects.filter(kind=ImportBatch.Kind.BILLING, source=source, file_sha256=sha)
    with transaction.atomic():
        batch = import_batch_record(
            kind=ImportBatch.Kind.BILLING,
            format=format,
            source=source,
            file_name=name or str(files[0].path),
            sha=sha,
        )
        if batch.status == ImportBatch.Status.DUPLICATE:
            return batch
        ImportBatchPart.objects.bulk_create(
            ImportBatchPart(batch=batch, index=i, file_name=str(f.path), label=f.label)
            for i, f in enumerate(files)
        )
    unfinished = same.filter(
        status__in=[ImportBatch.Status.PENDING, ImportBatch.Status.RUNNING], id__lt=batch.pk
    )
    for stale_id in unfinished.values_list("id", flat=True):
        _batch_abandon(batch_id=stale_id, by=batch)
    return batch


def _batch_abandon(*, batch_id: int, by: ImportBatch) -> None:
    with transaction.atomic():
        # Part rows first, as billing_batch_finish locks them: a part still loading somewhere
        # commits before this, and one not started yet then sees the batch FAILED and skips.
        list(ImportBatchPart.objects.select_for_update().filter(batch_id=batch_id))
        updated = ImportBatch.objects.filter(
            id=batch_id, status__in=[ImportBatch.Status.PENDING, ImportBatch.Status.RUNNING]
        ).update(
            status=ImportBatch.Status.FAILED,
            error=f"did not finish; the same delivery was imported again as batch {by.pk}",
            finished_at=timezone.now(),
        )
        if updated:
            line_items_batch_delete(batch_id=batch_id)


def billing_batch_start(*, batch_id: int) -> list[int]:
    """Claim a pending batch (PENDING -> RUNNING) and return its part ids to load; [] when the
    batch is not pending (a duplicate, already run, or claimed by another caller)."""
    if not import_batch_claim(batch_id=batch_id):
        return []
    return list(
        ImportBatchPart.objects.filter(batch_id=batch_id)
        .order_by("index")
        .values_list("id", flat=True)
    )


def billing_part_ingest(*, part_id: int) -> ImportBatchPart:
    """Load one part's rows under its batch id and record its totals; return the part.

    Idempotent: a part already loaded or failed is returned unchanged. The rows and the part's
    SUCCEEDED status commit together, so a worker killed half-way leaves the part PENDING and no
    rows (a redelivered task loads it again). Errors never raise: they are recorded on the part,
    naming the part, row and column, and the finish step fails the batch with them."""
    part = ImportBatchPart.objects.get(id=part_id)
    if part.status != ImportBatchPart.Status.PENDING:
        return part
    import_batch_touch(batch_id=part.batch_id)
    try:
        with heartbeat(lambda: import_batch_touch(batch_id=part.batch_id)):
            _part_load(part_id)
        fault_point("commit")
    except (OperationalError, InterfaceError):
        # The connection dropped (server restart, failover, pg_terminate_backend): the load's
        # transaction is gone, the part is still PENDING. Raise for the task to retry, on a
        # fresh connection.
        _close_broken_connection()
        raise
    except ImportFormatError as exc:
        _part_fail(part, error=str(exc))
    except Exception as exc:  # anything else still fails the part, with the reason kept
        logger.exception("billing batch %s part %s failed", part.batch_id, part.index)
        _part_fail(part, error=f"file {part.label or part.file_name}: {type(exc).__name__}: {exc}")
    part.refresh_from_db()
    return part


def _part_load(part_id: int) -> None:
    chunks = None
    if writers_queue():
        # SQLite: the file is read before the transaction (billing_ingest/loading/read_ahead.py), so
        # no other writer waits while it is parsed; the transaction below only writes.
        part = ImportBatchPart.objects.get(id=part_id)
        batch = ImportBatch.objects.get(id=part.batch_id)
        if part.status != ImportBatchPart.Status.PENDING:
            return
        if batch.status == ImportBatch.Status.RUNNING:
            chunks = read_before_writing(_parsed(batch, part))
    with transaction.atomic():
        part = ImportBatchPart.objects.select_for_update().get(id=part_id)
        if part.status != ImportBatchPart.Status.PENDING:
            return  # loaded meanwhile by a duplicate delivery of this task
        batch = ImportBatch.objects.get(id=part.batch_id)
        if batch.status != ImportBatch.Status.RUNNING:
            # The batch was finished or abandoned without this part: loading now would leave
            # rows nobody swaps in or cleans up.
            part.status = ImportBatchPart.Status.FAILED
            part.error = f"not loaded: batch {batch.pk} is {batch.status}"
            part.finished_at = timezone.now()
            part.save(update_fields=["status", "error", "finished_at"])
            return
        if chunks is None:
            chunks = _parsed(batch, part)
        totals = _load_rows(batch, chunks, index=part.index)
        _record_success(part, totals, status=ImportBatchPart.Status.SUCCEEDED)


def _parsed(batch: ImportBatch, part: ImportBatchPart) -> Iterator[list[LineItemRow]]:
    parse = billing_parser(batch.format)
    return parse(Path(part.file_name), file_label=part.label or part.file_name)


def _close_broken_connection() -> None:
    if not connection.in_atomic_block:
        connection.close()


def _part_fail(part: ImportBatchPart, *, error: str) -> None:
    count = ImportBatchPart.objects.filter(batch_id=part.batch_id).count()
    if count > 1:
        error = f"part {part.index + 1} of {count}: {error}"
    # Own transaction: the failure must be recorded although the load's was rolled back.
    with transaction.atomic():
        ImportBatchPart.objects.filter(id=part.pk, status=ImportBatchPart.Status.PENDING).update(
            status=ImportBatchPart.Status.FAILED, error=error, finished_at=timezone.now()
        )


def _load_rows(batch: ImportBatch, chunks: Iterator[list[LineItemRow]], *, index: int) -> _Totals:
    totals = _Totals()
    postgresql = connection.vendor == "postgresql"
    if postgresql and batch.format in DATABASE_FREE_PARSERS:
        # Parse the next chunk while PostgreSQL ingests this one's COPY.
        chunks = prefetched(chunks)
    # Partitioned: each month's rows go to the part's own table for the month, made before its
    # first COPY and attached by the finish step (billing_ingest.loading.partitions).
    tables = PartTables(batch.pk, index) if line_items_partitioned() else None
    for chunk in chunks:
        if isinstance(chunk, LineItemTable) and postgresql:
            # Columnar chunk: one COPY and pyarrow sums, no Python work per row.
            constants = {"batch_id": batch.pk, "source": batch.source}
            for into, rows in table_by_month(chunk.table, tables):
                bulk_load_table(CostLineItem, rows, constants=constants, into=into)
            totals.add_table(chunk.table)
            fault_point("copy")
            continue
        totals.take_notes(chunk)
        for item in chunk:
            item["batch_id"] = batch.pk
            item["source"] = batch.source
        for into, items in rows_by_month(chunk, tables):
            bulk_load(CostLineItem, items, into=into)
        totals.add(chunk)
        fault_point("copy")
    return totals


def billing_batch_finish(*, batch_id: int) -> ImportBatch:
    """Swap a RUNNING batch in when every part loaded, else fail it; one transaction.

    Idempotent (the chord callback and its error path may both call it): a batch no longer
    RUNNING is returned unchanged, after deleting any rows a late part left under it."""
    with transaction.atomic():
        # Lock the parts before touching the batch (same order as _batch_abandon), so a part
        # still loading commits first and a second finisher waits, then sees a finished batch.
        parts = list(
            ImportBatchPart.objects.select_for_update().filter(batch_id=batch_id).order_by("index")
        )
        batch = ImportBatch.objects.get(id=batch_id)
        if batch.status != ImportBatch.Status.RUNNING:
            if batch.status in (ImportBatch.Status.FAILED, ImportBatch.Status.SUPERSEDED):
                line_items_batch_delete(batch_id=batch_id)
            return batch
        unfinished = [p for p in parts if p.status != ImportBatchPart.Status.SUCCEEDED]
        if unfinished or not parts:
            _batch_fail(batch, unfinished, total=len(parts))
            return batch
        totals = _Totals()
        for part in parts:
            totals.merge(part)
        _lock_source(batch.source)
        _supersede(batch, periods=totals.periods)
        _record_success(batch, totals, status=ImportBatch.Status.SUCCEEDED)
        # In the same transaction: whoever settles the batch (this command, a chord callback,
        # a redelivered part's), its months are queued for the pipeline or none of it happened.
        month_changes_record(
            months=batch.billing_periods,
            kind=MonthChange.Kind.BILLING,
            batch_id=batch.pk,
            start_pipeline=batch.pipeline != ImportBatch.Pipeline.OFF,
        )
    # Settled: statistics for what it filled (its own partitions, new tables) before the
    # pipeline reads them.
    partitioned = line_items_partitioned()
    tables_analyze_if_changed(
        batch_tables(batch_id=batch_id) if partitioned else [CostLineItem._meta.db_table]
    )
    return batch


def _batch_fail(batch: ImportBatch, unfinished: list[ImportBatchPart], *, total: int) -> None:
    """Inside the finish transaction: drop the rows the good parts loaded, keep the reason."""
    line_items_batch_delete(batch_id=batch.pk)
    if not unfinished:
        error = "batch has no parts"
    else:
        part = next((p for p in unfinished if p.status == ImportBatchPart.Status.FAILED), None)
        if part is not None:
            error = part.error
        else:
            part = unfinished[0]
            where = f"part {part.index + 1} of {total}: " if total > 1 else ""
            error = f"{where}file {part.label or part.file_name}: import task did not finish"
    batch.status = ImportBatch.Status.FAILED
    batch.error = error
    batch.finished_at = timezone.now()
    batch.save(update_fields=["status", "error", "finished_at"])


def billing_batch_ingest(*, batch_id: int) -> ImportBatch:
    """Run one pending billing batch to SUCCEEDED or FAILED in this process and return it:
    the parts one after the other, then the finish step (what the chord does across workers).

    A batch recorded without parts (created directly, as bench/ingest.py does) gets one part,
    its file_name. Idempotent: a batch that is not pending is returned unchanged."""
    batch = ImportBatch.objects.get(id=batch_id)
    if batch.status == ImportBatch.Status.PENDING and not batch.parts.exists():
        path = Path(batch.file_name)
        ImportBatchPart.objects.create(batch=batch, index=0, file_name=str(path), label=path.name)
    part_ids = billing_batch_start(batch_id=batch_id)
    if not part_ids:
        return batch
    for part_id in part_ids:
        billing_part_ingest(part_id=part_id)
    return billing_batch_finish(batch_id=batch_id)


def _lock_source(source: str) -> None:
    """Serialise the swap per source on PostgreSQL, so two restatements finishing together
    cannot each keep their own rows. SQLite already serialises every write transaction."""
    if connection.vendor != "postgresql":
        return
    key = int.from_bytes(hashlib.sha256(source.encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def _supersede(batch: ImportBatch, *, periods: set[date]) -> None:
    """Replace the source's other rows for the file's billing periods by the file's; a batch
    left with no rows is marked SUPERSEDED by this one. Periods the file does not hold are left
    alone. Partitioned (PostgreSQL): partitions_swap; rows outside batch partitions (DEFAULT
    partitions, an unpartitioned table) are deleted."""
    partitioned = line_items_partitioned()
    touched = partitions_swap(batch, periods=periods) if partitioned else set()
    replaced = CostLineItem.objects.filter(source=batch.source, billing_period__in=periods).exclude(
        batch_id=batch.pk
    )
    touched.update(replaced.values_list("batch_id", flat=True).distinct())
    if not touched:
        return
    replaced.delete()
    emptied = ImportBatch.objects.filter(id__in=touched).exclude(
        id__in=CostLineItem.objects.filter(batch_id__in=touched).values("batch_id")
    )
    if partitioned:  # a batch still loading may hold rows of other months in its own tables
        emptied = emptied.filter(id__in=[i for i in touched if not batch_tables(batch_id=i)])
    emptied.update(status=ImportBatch.Status.SUPERSEDED, superseded_by=batch)


def _record_success(record: ImportBatch | ImportBatchPart, totals: _Totals, *, status: str) -> None:
    # A part and its batch carry the same result fields: the batch's are the parts' summed.
    record.status = status
    record.row_count = totals.rows
    record.billing_periods = totals.period_labels()
    record.currency_totals = totals.as_json()
    record.notes = dict(sorted(totals.notes.items()))
    record.error = ""
    record.finished_at = timezone.now()
    record.save(
        update_fields=[
            "status",
            "row_count",
            "billing_periods",
            "currency_totals",
            "notes",
            "error",
            "finished_at",
        ]
    )
