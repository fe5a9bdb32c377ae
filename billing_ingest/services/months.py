"""Which billing months an import changed, and the record of those changes (MonthChange).

A settled import must re-attribute its months whoever settles it: the command that waits, the
chord callback on a worker, or a part task the broker redelivered after a worker died. So the
change is a row written in the transaction that settles the batch, not a message sent after it;
the pipeline (finops.pipeline) claims those rows. billing_ingest sits below the pipeline and
never imports it (see finops.core.pipeline_wake for how it is woken).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Max, Min, Q
from django.utils import timezone

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord, MonthChange
from finops.core.months import month_format, month_from_label, month_next


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
    after_last = month_next(last.date())
    months = (
        CostLineItem.objects.settled()
        .filter(billing_period__range=(first_month, after_last))
        .order_by()
        .values_list("billing_period", flat=True)
        .distinct()
    )
    return sorted({month_format(m) for m in months})


def month_changes_record(
    *, months: Iterable[str], kind: str, batch_id: int | None = None, start_pipeline: bool = True
) -> list[MonthChange]:
    """Record that these months ("YYYY-MM") changed. Called inside the caller's transaction
    (the swap of a billing batch), so the record commits with the change or not at all."""
    now = timezone.now()
    return MonthChange.objects.bulk_create(
        MonthChange(
            month=month_from_label(label),
            kind=kind,
            batch_id=batch_id,
            changed_at=now,
            start_pipeline=start_pipeline,
        )
        for label in sorted(set(months))
    )


def month_changes_of_batches(*, batch_ids: Iterable[int]) -> dict[str, int | None]:
    """month "YYYY-MM" -> the pipeline run that took the batches' change of it (None: not yet)."""
    rows = MonthChange.objects.filter(batch_id__in=list(batch_ids), start_pipeline=True)
    return {
        month_format(month): run_id
        for month, run_id in rows.order_by("month", "id").values_list("month", "pipeline_run_id")
    }
