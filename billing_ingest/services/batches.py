"""The ImportBatch lifecycle shared by every kind of import.

pending -> running (claimed with a conditional UPDATE, so two workers never run one batch)
        -> succeeded | failed; a later batch for the same source and period marks it superseded.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from billing_ingest.loading.partitions import batch_tables, line_items_partitioned, partitions_drop
from billing_ingest.models import CostLineItem, ImportBatch, ImportBatchPart
from finops.core.heartbeat import dead_worker_message, heartbeat_deadline

logger = logging.getLogger("finops.billing_ingest")

_CHUNK = 1024 * 1024


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def import_batch_create(*, kind: str, format: str, source: str, path: Path) -> ImportBatch:
    """Record a file to import (see import_batch_record)."""
    return import_batch_record(
        kind=kind, format=format, source=source, file_name=str(path), sha=file_sha256(path)
    )


def import_batch_record(
    *, kind: str, format: str, source: str, file_name: str, sha: str
) -> ImportBatch:
    """Record content to import. The same bytes already imported for this source are a no-op:
    the new batch is created as DUPLICATE (kept for the audit trail) and never runs."""
    previous = (
        ImportBatch.objects.filter(
            kind=kind, source=source, file_sha256=sha, status=ImportBatch.Status.SUCCEEDED
        )
        .order_by("-id")
        .first()
    )
    batch = ImportBatch.objects.create(
        kind=kind, format=format, source=source, file_name=file_name, file_sha256=sha
    )
    if previous is not None:
        batch.status = ImportBatch.Status.DUPLICATE
        batch.error = f"same content (sha256 {sha[:12]}) as batch {previous.pk}; nothing to do"
        batch.row_count = previous.row_count
        batch.billing_periods = previous.billing_periods
        batch.finished_at = timezone.now()
        batch.save()
    return batch


def import_batch_claim(*, batch_id: int) -> bool:
    """Move a pending batch to running. False when another worker got there first, or the
    batch is not pending (a duplicate, or already done): the caller then does nothing."""
    claimed = ImportBatch.objects.filter(id=batch_id, status=ImportBatch.Status.PENDING).update(
        status=ImportBatch.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    return claimed == 1


def import_batch_pipeline_set(*, batch_id: int, pipeline: str) -> None:
    """Who starts the pipeline once the batch settles (ImportBatch.Pipeline): "caller" when the
    caller imports several batches and starts it once at the end (if the caller dies first,
    the watchdog does), "off" for --no-attribute (the months are still recorded as changed,
    so the reconciliation says stale)."""
    ImportBatch.objects.filter(id=batch_id).update(pipeline=pipeline)


def import_batch_touch(*, batch_id: int) -> None:
    """Heartbeat of a batch a worker is loading (see finops.core.heartbeat)."""
    ImportBatch.objects.filter(id=batch_id, status=ImportBatch.Status.RUNNING).update(
        heartbeat_at=timezone.now()
    )


def import_batch_fail_if_dead(*, batch_id: int) -> ImportBatch:
    """Fail a RUNNING batch whose worker died (no heartbeat within the timeout): its own rows
    (invisible, never settled) are deleted and the previous data stays. Returns the batch as it
    now is; a live or finished batch is returned unchanged."""
    for dead_id in _fail_dead(Q(id=batch_id)):
        logger.warning("import batch %s failed: its worker died", dead_id)
    return ImportBatch.objects.get(id=batch_id)


def import_batches_fail_dead() -> list[int]:
    """The watchdog's sweep: fail every RUNNING batch with no heartbeat within the timeout."""
    return _fail_dead(Q())


def _fail_dead(where: Q) -> list[int]:
    stale = Q(heartbeat_at__lt=heartbeat_deadline()) | Q(
        heartbeat_at__isnull=True, started_at__lt=heartbeat_deadline()
    )
    candidates = ImportBatch.objects.filter(where, stale, status=ImportBatch.Status.RUNNING)
    failed: list[int] = []
    for batch_id, last in candidates.values_list("id", "heartbeat_at"):
        with transaction.atomic():
            # Parts first, in the order billing_batch_finish locks them: a finish that is
            # committing right now wins, and this sees the batch no longer RUNNING.
            list(ImportBatchPart.objects.select_for_update().filter(batch_id=batch_id))
            updated = ImportBatch.objects.filter(
                stale, id=batch_id, status=ImportBatch.Status.RUNNING
            ).update(
                status=ImportBatch.Status.FAILED,
                error=dead_worker_message(last),
                finished_at=timezone.now(),
            )
            if updated:
                line_items_batch_delete(batch_id=batch_id)
                failed.append(batch_id)
    return failed


def import_batch_fail(*, batch_id: int, error: str) -> None:
    # Own transaction: the failure must be recorded even though the import's was rolled back.
    # A batch that already ended (settled, or failed by someone else) keeps its outcome.
    unfinished = [ImportBatch.Status.PENDING, ImportBatch.Status.RUNNING]
    with transaction.atomic():
        ImportBatch.objects.filter(id=batch_id, status__in=unfinished).update(
            status=ImportBatch.Status.FAILED, error=error, finished_at=timezone.now()
        )


def import_batch_record_failure(
    *, kind: str, format: str, source: str, file_name: str, error: str
) -> ImportBatch:
    """Record an import that failed before it had a local file (a remote export whose data
    could not be fetched), so the failure shows in the import history like any other."""
    now = timezone.now()
    return ImportBatch.objects.create(
        kind=kind,
        format=format,
        source=source,
        file_name=file_name,
        status=ImportBatch.Status.FAILED,
        error=error,
        started_at=now,
        finished_at=now,
    )


def line_items_batch_delete(*, batch_id: int) -> None:
    """Delete a batch's line items inside the caller's transaction. Partitioned (PostgreSQL):
    DROP the batch's partitions and its parts' unattached tables, then delete what rows of it
    are left elsewhere (DEFAULT partitions). Otherwise delete its rows."""
    if line_items_partitioned():
        partitions_drop(batch_tables(batch_id=batch_id))
    CostLineItem.objects.filter(batch_id=batch_id).delete()
