"""Inference tasks: thin wrappers that take ids (or a month) and call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from finops.core.months import month_parse
from finops.inference.services import endpoint_costs_rebuild, usage_batch_ingest

# A month of hourly per-pod counters is a few hundred thousand samples: minutes at most.
SOFT_TIME_LIMIT = 20 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


@shared_task(soft_time_limit=SOFT_TIME_LIMIT, time_limit=TIME_LIMIT)
def ingest_inference_batch(batch_id: int) -> dict[str, Any]:
    """Import one usage batch; safe to re-run (a batch that is not pending is left alone)."""
    batch = usage_batch_ingest(batch_id=batch_id)
    return {
        "batch_id": batch.pk,
        "status": batch.status,
        "row_count": batch.row_count,
        "months": list(batch.billing_periods),
        "error": batch.error,
    }


@shared_task(
    name="finops.inference.tasks.rebuild_endpoint_costs",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def rebuild_endpoint_costs(month: str, pipeline_run_id: int | None = None) -> int:
    """Rebuild one billing month's ("YYYY-MM") EndpointCost rows from its ledger; idempotent.
    The pipeline's step after attribution (finops.pipeline.steps)."""
    return endpoint_costs_rebuild(month=month_parse(month))
