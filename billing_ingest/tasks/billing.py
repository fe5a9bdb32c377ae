"""Billing import tasks: one task per part of a delivery, joined by a chord whose callback
swaps the batch in (or fails it) atomically. See billing_ingest.services.billing."""

from __future__ import annotations

from typing import Any

from celery import Signature, chain, chord, group, shared_task
from celery.result import AsyncResult
from django.conf import settings

from billing_ingest.services.billing import (
    billing_batch_finish,
    billing_batch_ingest,
    billing_batch_start,
    billing_part_ingest,
)

__all__ = [
    "billing_batch_dispatch",
    "finish_billing_batch",
    "ingest_billing_batch",
    "ingest_billing_part",
]

_LIMITS: dict[str, Any] = {
    "acks_late": True,
    "soft_time_limit": settings.CELERY_TASK_SOFT_TIME_LIMIT,
    "time_limit": settings.CELERY_TASK_TIME_LIMIT,
}


@shared_task(name="billing_ingest.tasks.billing.ingest_billing_part", **_LIMITS)
def ingest_billing_part(part_id: int) -> dict[str, Any]:
    """Load one part of a running batch. Never raises for a bad file: the failure is recorded on
    the part (and returned) so the chord callback always runs and fails the batch with it."""
    part = billing_part_ingest(part_id=part_id)
    return {"part_id": part.pk, "status": part.status, "error": part.error}


@shared_task(name="billing_ingest.tasks.billing.finish_billing_batch", **_LIMITS)
def finish_billing_batch(
    part_results: list[dict[str, Any]] | None = None, *, batch_id: int
) -> dict[str, Any]:
    """Chord callback (and its error path): swap the batch in or fail it, in one transaction.
    The part rows in the database decide, not ``part_results`` (absent on the error path)."""
    batch = billing_batch_finish(batch_id=batch_id)
    return {"batch_id": batch.pk, "status": batch.status, "error": batch.error}


@shared_task(name="billing_ingest.tasks.billing.ingest_billing_batch", **_LIMITS)
def ingest_billing_batch(batch_id: int) -> dict[str, Any]:
    """Import a whole batch in one task, parts one after another (no fan-out). Kept for callers
    that want one task; ingest_billing uses billing_batch_dispatch."""
    batch = billing_batch_ingest(batch_id=batch_id)
    return {"batch_id": batch.pk, "status": batch.status, "error": batch.error}


def billing_batch_dispatch(
    *, batch_id: int, then: Signature[Any] | None = None
) -> AsyncResult[Any] | None:
    """Claim a pending batch and send chord(one ingest_billing_part per part) ->
    finish_billing_batch; returns the callback's result, or None when the batch was not pending.

    A part task that dies without returning (hard time limit, lost worker) makes the chord
    fail instead of calling back: the link_error then runs the same finish, which fails the
    batch naming that part. Eager (no broker), the whole chord runs inline here. ``then``: a
    task to run after the batch is swapped in (a browser upload's re-attribution)."""
    part_ids = billing_batch_start(batch_id=batch_id)
    if not part_ids:
        return None
    finish = finish_billing_batch.s(batch_id=batch_id)
    finish.on_error(finish_billing_batch.si(batch_id=batch_id))
    callback = finish if then is None else chain(finish, then)
    header = group(ingest_billing_part.s(part_id) for part_id in part_ids)
    return chord(header, callback).apply_async()
