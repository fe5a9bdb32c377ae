"""Run-economics tasks: thin wrappers that take a month and call one service."""

from __future__ import annotations

from celery import shared_task

from finops.core.months import month_parse
from finops.core.pipeline_wake import ECONOMICS_REFRESH_RUNS_TASK, ECONOMICS_REFRESH_TASK
from finops.economics.services import economics_refresh

# A month's runs in bulk queries: seconds to a few minutes at the largest scale.
SOFT_TIME_LIMIT = 20 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


@shared_task(
    name=ECONOMICS_REFRESH_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def refresh_run_economics(month: str, pipeline_run_id: int | None = None) -> dict[str, int]:
    """Rebuild one billing month's ("YYYY-MM") RunEconomics rows; idempotent. The pipeline's
    step after attribution (finops.pipeline.steps), and sent by name when energy of the month
    is imported (finops.core.pipeline_wake.economics_refresh_send)."""
    return economics_refresh(month=month_parse(month))


@shared_task(
    name=ECONOMICS_REFRESH_RUNS_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def refresh_run_economics_of_runs(month: str, run_ids: list[str]) -> dict[str, int]:
    """Rebuild the RunEconomics rows of these runs in one month ("YYYY-MM"); idempotent. Sent by
    name when run metrics naming them are imported (economics_refresh_send)."""
    return economics_refresh(month=month_parse(month), run_ids=run_ids)
