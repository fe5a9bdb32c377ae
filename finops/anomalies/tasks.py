"""Anomaly tasks: thin wrappers that parse their arguments and call one service.

`detect_anomalies_for_month` is the step the pipeline chains after attribution (and endpoint
costs) of a month; `detect_anomalies_recent` is the daily beat run; both are idempotent."""

from __future__ import annotations

import calendar
import datetime as dt
from dataclasses import asdict

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from finops.anomalies import emails
from finops.anomalies.services import DetectSummary, anomalies_detect
from finops.core.months import month_parse

# A month of a large ledger reads in well under a minute; the limits still stop a hung run.
SOFT_TIME_LIMIT = 15 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


def _summary(summary: DetectSummary) -> dict[str, object]:
    return {k: str(v) if isinstance(v, dt.date) else v for k, v in asdict(summary).items()}


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
    first = month_parse(month)
    last = first.replace(day=calendar.monthrange(first.year, first.month)[1])
    result = _summary(anomalies_detect(since=first, until=last))
    result["pipeline_run_id"] = pipeline_run_id
    return result


@shared_task(
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
)
def detect_anomalies_recent() -> dict[str, object]:
    """Daily: the last 35 days of the ledger, as `manage.py detect_anomalies` does."""
    return _summary(anomalies_detect())


@shared_task(soft_time_limit=5 * 60, time_limit=6 * 60)
def send_anomaly_digests(day: str | None = None) -> int:
    """The digests of one UTC day (default: yesterday). Idempotent: one email per user and day."""
    when = dt.date.fromisoformat(day) if day else timezone.now().date() - dt.timedelta(days=1)
    return emails.digests_send(day=when)
