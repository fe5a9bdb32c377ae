"""The ImportBatch lifecycle shared by every kind of import.

pending -> running (claimed with a conditional UPDATE, so two workers never run one batch)
        -> succeeded | failed; a later batch for the same source and period marks it superseded.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from billing_ingest.models import ImportBatch

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
        status=ImportBatch.Status.RUNNING, started_at=timezone.now()
    )
    return claimed == 1


def import_batch_fail(*, batch_id: int, error: str) -> None:
    # Own transaction: the failure must be recorded even though the import's was rolled back.
    with transaction.atomic():
        ImportBatch.objects.filter(id=batch_id).update(
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
