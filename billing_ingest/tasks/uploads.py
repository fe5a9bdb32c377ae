"""After a job log uploaded from the browser: record the billing months its jobs touched and
wake the pipeline, as `ingest_jobs` does after its import (it waits; an upload does not, so this
runs as the next task). A billing upload needs nothing here: its batch wakes the pipeline itself
when it settles."""

from __future__ import annotations

from celery import shared_task
from django.db import transaction

from billing_ingest.models import ImportBatch, MonthChange
from billing_ingest.services.dispatch import PIPELINE_FOR_JOB_BATCH_TASK
from billing_ingest.services.months import job_months_touched, month_changes_record
from finops.core.pipeline_wake import pipeline_kick

__all__ = ["pipeline_for_job_batch"]


@shared_task(
    name=PIPELINE_FOR_JOB_BATCH_TASK,
    soft_time_limit=60,
    time_limit=90,
    acks_late=True,
)
def pipeline_for_job_batch(batch_id: int) -> list[str]:
    """Idempotent: recording a month twice joins the run already waiting for it."""
    batch = ImportBatch.objects.get(id=batch_id)
    if batch.status != ImportBatch.Status.SUCCEEDED:
        return []
    months = job_months_touched(batch_ids=[batch.pk])
    if months:
        with transaction.atomic():
            month_changes_record(months=months, kind=MonthChange.Kind.JOBS)
        pipeline_kick()
    return months
