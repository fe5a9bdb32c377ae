"""Anomaly tasks: thin wrappers that parse their arguments and call one service.

`detect_anomalies_for_month` is the step the pipeline chains after attribution (and endpoint
costs) of a month; `detect_anomalies_recent` is the daily beat run; both are idempotent."""

from __future__ import annotations

import datetime as dt

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from finops.anomalies import emails
from finops.anomalies.month_step import anomalies_month_step, detect_summary
from finops.anomalies.services import anomalies_detect
from finops.core.months import month_parse

# A month of a large ledger reads in well under a minute; the limits still stop a hung run.
SOFT_TIME_LIMIT = 15 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


@shared_task(
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
)
def detect_anomalies_for_month(month: str, pipeline_run_id: int | None = None) -> dict[str, object]:
    """Re-evaluate the anomalies of the days of one month ("YYYY-MM"). Idempotent.

    pipeline_run_id: the pipeline run that chained this step (for its log); unused otherwise."""
    return anomalies_month_step(month_parse(month), pipeline_run_id).task_result()


@shared_task(
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
)
def detect_anomalies_recent() -> dict[str, object]:
    """Daily: the last 35 days of the ledger, as `manage.py detect_anomalies` does."""
    return detect_summary(anomalies_detect())


@shared_task(soft_time_limit=5 * 60, time_limit=6 * 60)
def send_anomaly_digests(day: str | None = None) -> int:
    """The digests of one UTC day (default: yesterday). Idempotent: one email per user and day."""
    when = dt.date.fromisoformat(day) if day else timezone.now().date() - dt.timedelta(days=1)
    return emails.digests_send(day=when)
