"""After an import, re-attribute the billing months it touched, so that the reconciliation a
user looks at next already includes the new data.

billing_ingest sits below attribution (imports flow one way), so the attribution task is named
in settings.FINOPS_REATTRIBUTE_TASK and looked up at run time rather than imported here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.models import Max, Min, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord


def _month_key(day: dt.date) -> str:
    return day.strftime("%Y-%m")


def billing_months_touched(*, batches: Iterable[ImportBatch]) -> list[str]:
    succeeded = ImportBatch.Status.SUCCEEDED
    return sorted({m for b in batches if b.status == succeeded for m in b.billing_periods})


def job_months_touched(*, batch_ids: Iterable[int]) -> list[str]:
    """Billing months that hold line items and overlap the new jobs. A job's hours can sit on
    the invoice of the month after (late charges), hence the month after the last one too."""
    span = JobRecord.objects.filter(batch_id__in=list(batch_ids)).aggregate(
        first=Min("start"), last=Max("end"), running=Min("id", filter=Q(end__isnull=True))
    )
    if span["first"] is None:
        return []
    last = timezone.now() if span["running"] is not None else span["last"] or span["first"]
    first_month = span["first"].date().replace(day=1)
    after_last = (last.date().replace(day=1) + dt.timedelta(days=32)).replace(day=1)
    months = (
        CostLineItem.objects.settled()
        .filter(billing_period__range=(first_month, after_last))
        .order_by()
        .values_list("billing_period", flat=True)
        .distinct()
    )
    return sorted({_month_key(m) for m in months})


def months_reattribute(*, months: list[str], timeout: float) -> dict[str, str]:
    """Run the attribution task for each month and wait; returns month -> status or error."""
    task = import_string(settings.FINOPS_REATTRIBUTE_TASK)
    outcome: dict[str, str] = {}
    for month in months:
        try:
            result = task.delay(month).get(timeout=timeout)
            outcome[month] = str(result.get("status", "done"))
        except Exception as exc:  # reported, not raised: the import itself succeeded
            outcome[month] = f"failed: {type(exc).__name__}: {exc}"
    return outcome


def report_reattribution(command: BaseCommand, outcome: dict[str, str]) -> None:
    for month, status in outcome.items():
        stream = command.stdout if status == "succeeded" else command.stderr
        stream.write(f"attribution {month}: {status}")
