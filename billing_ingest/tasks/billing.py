"""Billing import tasks: one task per part of a delivery, joined by a chord whose callback
swaps the batch in (or fails it) atomically. See billing_ingest.services.billing."""

from __future__ import annotations

from typing import Any, TypedDict

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from billing_ingest.models import ImportBatch
from billing_ingest.services.billing import (
    billing_batch_finish,
    billing_batch_ingest,
    billing_part_ingest,
)
from billing_ingest.services.dispatch import FINISH_BILLING_BATCH_TASK, INGEST_BILLING_PART_TASK
from finops.core.pipeline_wake import pipeline_kick

__all__ = [
    "finish_billing_batch",
    "ingest_billing_batch",
    "ingest_billing_part",
]

# acks_late + reject_on_worker_lost (settings): a worker killed mid-task leaves its message to
# be delivered again, and every task here is idempotent, so the redelivery finishes the work.
_LIMITS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "soft_time_limit": settings.CELERY_TASK_SOFT_TIME_LIMIT,
    "time_limit": settings.CELERY_TASK_TIME_LIMIT,
}


class PartTaskResult(TypedDict):
    """What ingest_billing_part returns (the chord's part results)."""

    part_id: int
    status: str
    error: str


class BatchTaskResult(TypedDict):
    """What finish_billing_batch and ingest_billing_batch return."""

    batch_id: int
    status: str
    error: str


# A dropped database connection (restart, failover) is the only transient failure of a load:
# the part is still PENDING and loads again on a fresh connection. Bad files are not retried.
_TRANSIENT = (OperationalError, InterfaceError)


@shared_task(
    name=INGEST_BILLING_PART_TASK,
    autoretry_for=_TRANSIENT,
    max_retries=3,
    retry_backoff=2,
    retry_jitter=False,
    **_LIMITS,
)
def ingest_billing_part(part_id: int) -> PartTaskResult:
    """Load one part of a running batch. Never raises for a bad file: the failure is recorded on
    the part (and returned) so the chord callback always runs and fails the batch with it."""
    part = billing_part_ingest(part_id=part_id)
    return {"part_id": part.pk, "status": part.status, "error": part.error}


@shared_task(name=FINISH_BILLING_BATCH_TASK, **_LIMITS)
def finish_billing_batch(
    part_results: list[PartTaskResult] | None = None, *, batch_id: int
) -> BatchTaskResult:
    """Chord callback (and its error path): swap the batch in or fail it, in one transaction.
    The part rows in the database decide, not ``part_results`` (absent on the error path)."""
    batch = billing_batch_finish(batch_id=batch_id)
    _settled(batch)
    return {"batch_id": batch.pk, "status": batch.status, "error": batch.error}


def _settled(batch: ImportBatch) -> None:
    # Also when this run found the batch already settled (a redelivered callback): waking the
    # pipeline twice is harmless, as a month change is claimed once.
    if batch.status == ImportBatch.Status.SUCCEEDED and batch.pipeline == ImportBatch.Pipeline.AUTO:
        pipeline_kick()


@shared_task(name="billing_ingest.tasks.billing.ingest_billing_batch", **_LIMITS)
def ingest_billing_batch(batch_id: int) -> BatchTaskResult:
    """Import a whole batch in one task, parts one after another (no fan-out). Kept for callers
    that want one task; ingest_billing uses services.dispatch.billing_batch_dispatch."""
    batch = billing_batch_ingest(batch_id=batch_id)
    _settled(batch)
    return {"batch_id": batch.pk, "status": batch.status, "error": batch.error}
