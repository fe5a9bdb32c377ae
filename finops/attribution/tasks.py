"""Attribution tasks: thin wrappers that parse the month and call one service."""

from __future__ import annotations

import datetime as dt

from celery import shared_task
from django.utils import timezone

from billing_ingest.models import CostLineItem
from finops.attribution.models import AttributionRun
from finops.attribution.services import attribution_run, parse_month
from finops.attribution.signals import month_attributed

# The benchmark month (744k line items, 300k jobs) attributes in about a minute; the limits leave
# room for a much larger month while still killing a run that hangs.
SOFT_TIME_LIMIT = 30 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


@shared_task(soft_time_limit=SOFT_TIME_LIMIT, time_limit=TIME_LIMIT)
def attribute_month(month: str) -> dict[str, object]:
    """Attribute one billing month ("YYYY-MM"). Idempotent: a re-run replaces the month's rows."""
    first = parse_month(month)
    run = attribution_run(month=first)
    if run.status == AttributionRun.Status.SUCCEEDED:
        month_attributed.send(sender=AttributionRun, month=first)
    return {
        "attribution_run": run.pk,
        "month": month,
        "status": run.status,
        "line_items": run.line_items,
        "jobs": run.jobs,
    }


def _previous_month(first: dt.date) -> dt.date:
    return (first - dt.timedelta(days=1)).replace(day=1)


@shared_task(soft_time_limit=60, time_limit=120)
def attribute_open_months() -> list[str]:
    """Nightly: re-attribute the current and the previous month, those that have line items
    (providers restate both for weeks). Each month is its own task, so one failing month does
    not stop the other."""
    current = timezone.now().date().replace(day=1)
    candidates = [_previous_month(current), current]
    months = [
        m.strftime("%Y-%m")
        for m in candidates
        if CostLineItem.objects.filter(billing_period=m).exists()
    ]
    for month in months:
        attribute_month.delay(month)
    return months
