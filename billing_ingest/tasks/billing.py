"""Billing import tasks."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from billing_ingest.services.billing import billing_batch_ingest

__all__ = ["ingest_billing_batch"]


@shared_task(
    name="billing_ingest.tasks.billing.ingest_billing_batch",
    acks_late=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def ingest_billing_batch(batch_id: int) -> dict[str, Any]:
    """Import one billing batch. Failures are recorded on the batch (status FAILED, error naming
    file, row and column), not raised, so the caller reads them from the batch."""
    batch = billing_batch_ingest(batch_id=batch_id)
    return {"batch_id": batch.pk, "status": batch.status, "error": batch.error}
