"""Run-metrics tasks: thin wrappers that take a batch id and call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from finops.run_metrics.services import metrics_batch_ingest

# A run's metrics are a row per logged step: thousands to a few million lines at most.
SOFT_TIME_LIMIT = 20 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


@shared_task(
    name="finops.run_metrics.tasks.ingest_run_metrics_batch",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def ingest_run_metrics_batch(batch_id: int) -> dict[str, Any]:
    """Import one run-metrics batch; safe to re-run (a batch that is not pending is left alone)."""
    batch = metrics_batch_ingest(batch_id=batch_id)
    return {
        "batch_id": batch.pk,
        "status": batch.status,
        "row_count": batch.row_count,
        "error": batch.error,
    }
