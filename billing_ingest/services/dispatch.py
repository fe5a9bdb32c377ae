"""Queue an import's tasks: the chord of a billing delivery, the chain of a job log.

A service queues tasks by their registered names (finops.core.queue), never by importing them:
the tasks import the services. The names are the tasks' explicit ``name=`` strings
(billing_ingest/tasks/), registered in every process by BillingIngestConfig.ready.
"""

from __future__ import annotations

from typing import Any

from celery import current_app
from celery.result import AsyncResult

from billing_ingest.services.batches import import_batch_fail
from billing_ingest.services.billing import billing_batch_start
from finops.core.queue import task_signature, tasks_chain_send, tasks_chord_send

INGEST_BILLING_PART_TASK = "billing_ingest.tasks.billing.ingest_billing_part"
FINISH_BILLING_BATCH_TASK = "billing_ingest.tasks.billing.finish_billing_batch"
INGEST_JOBS_BATCH_TASK = "billing_ingest.tasks.jobs.ingest_jobs_batch"
PIPELINE_FOR_JOB_BATCH_TASK = "billing_ingest.tasks.uploads.pipeline_for_job_batch"


def billing_batch_dispatch(*, batch_id: int) -> AsyncResult[Any] | None:
    """Claim a pending batch and send chord(one ingest_billing_part per part) ->
    finish_billing_batch; returns the callback's result, or None when the batch was not pending.

    A part task that dies without returning (hard time limit, lost worker) makes the chord
    fail instead of calling back: the link_error then runs the same finish, which fails the
    batch naming that part. Eager (no broker), the whole chord runs inline here. A broker that
    cannot be reached fails the batch at once (nothing was queued, the previous data stays) and
    raises."""
    part_ids = billing_batch_start(batch_id=batch_id)
    if not part_ids:
        return None
    callback = task_signature(FINISH_BILLING_BATCH_TASK, batch_id=batch_id)
    callback.on_error(
        task_signature(FINISH_BILLING_BATCH_TASK, batch_id=batch_id).set(immutable=True)
    )
    header = [task_signature(INGEST_BILLING_PART_TASK, part_id) for part_id in part_ids]
    try:
        return tasks_chord_send(header, callback)
    except Exception as exc:
        # Eager, the exception comes from running a task inline: the caller fails the batch.
        if not current_app.conf.task_always_eager:
            error = f"could not queue the import (broker unreachable?): {type(exc).__name__}: {exc}"
            import_batch_fail(batch_id=batch_id, error=error)
        raise


def jobs_batch_dispatch(*, batch_id: int) -> AsyncResult[Any]:
    """Send the jobs import of a batch, then the pipeline for the billing months its jobs
    touched (ingest_jobs_batch -> pipeline_for_job_batch)."""
    return tasks_chain_send(
        task_signature(INGEST_JOBS_BATCH_TASK, batch_id).set(immutable=True),
        task_signature(PIPELINE_FOR_JOB_BATCH_TASK, batch_id).set(immutable=True),
    )
