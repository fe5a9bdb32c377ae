"""After an upload from the browser: re-attribute the months the batch touched, as the
commands do after their imports (they wait; an upload does not, so this runs as the next task)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils.module_loading import import_string

from billing_ingest.models import ImportBatch
from billing_ingest.reattribute import billing_months_touched, job_months_touched

__all__ = ["reattribute_batch_months"]


@shared_task(
    name="billing_ingest.tasks.uploads.reattribute_batch_months",
    soft_time_limit=60,
    time_limit=90,
    acks_late=True,
)
def reattribute_batch_months(batch_id: int) -> list[str]:
    """Queue the attribution task for each billing month the batch touched (none unless it
    succeeded). Idempotent: attribution replaces a month's rows."""
    batch = ImportBatch.objects.get(id=batch_id)
    if batch.status != ImportBatch.Status.SUCCEEDED:
        return []
    if batch.kind == ImportBatch.Kind.JOBS:
        months = job_months_touched(batch_ids=[batch.pk])
    else:
        months = billing_months_touched(batches=[batch])
    task = import_string(settings.FINOPS_REATTRIBUTE_TASK)
    for month in months:
        task.delay(month)
    return months
