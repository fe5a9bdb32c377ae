"""Pricing tasks: thin, idempotent, time-limited."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from finops.core.months import month_parse
from finops.pricing.month_step import recommendations_month_step


@shared_task(
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=5,
    soft_time_limit=1800,
    time_limit=1860,
)
def refresh_recommendations_for_month(
    month: str, pipeline_run_id: int | None = None
) -> dict[str, object]:
    """After `month` (YYYY-MM) was attributed: compute and store its recommendations (a re-run
    replaces the figures, keeping each action's status and comment)."""
    return recommendations_month_step(month_parse(month), pipeline_run_id).task_result()
