"""Job log import tasks."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from celery import shared_task

from billing_ingest.parsers.slurm import SacctStats
from billing_ingest.services.dispatch import INGEST_JOBS_BATCH_TASK
from billing_ingest.services.jobs import jobs_batch_ingest

__all__ = ["ingest_jobs_batch"]

# Parsing and writing a month of a large cluster's jobs (300k+ rows) takes minutes, not hours.
SOFT_TIME_LIMIT = 50 * 60
TIME_LIMIT = 55 * 60


@shared_task(
    name=INGEST_JOBS_BATCH_TASK,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def ingest_jobs_batch(
    batch_id: int, columns: list[str] | None = None, delimiter: str | None = None
) -> dict[str, Any]:
    """Import one jobs batch; safe to re-run (a batch that is not pending is left alone).
    `columns`: the column names of a Slurm file without a header line; `delimiter`: its
    `sacct --delimiter` (default `|`).

    Returns a JSON-safe summary for the caller: batch status, rows stored, what was skipped.
    """
    stats = SacctStats()
    batch = jobs_batch_ingest(batch_id=batch_id, stats=stats, columns=columns, delimiter=delimiter)
    return {
        "batch_id": batch.pk,
        "status": batch.status,
        "row_count": batch.row_count,
        "error": batch.error,
        **asdict(stats),
    }
