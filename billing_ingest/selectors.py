"""Reads about imports: how far a batch has got (the Imports page polls it; the command line
draws it as a progress bar)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Count, Q, Sum

from billing_ingest.models import ImportBatch, ImportBatchPart, MonthChange
from finops.core.months import month_from_label

FINISHED = frozenset(
    {
        ImportBatch.Status.SUCCEEDED,
        ImportBatch.Status.FAILED,
        ImportBatch.Status.SUPERSEDED,
        ImportBatch.Status.DUPLICATE,
    }
)


@dataclass
class BatchProgress:
    batch_id: int
    kind: str
    status: str
    # Parts of the delivery loaded (or failed) out of all of them; a file without parts (job
    # logs) is one part, done when the batch has finished.
    parts_done: int
    parts_total: int
    # Rows loaded so far: the finished parts' until the batch is swapped in, then the batch's.
    rows: int
    error: str = ""
    billing_periods: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "finished": self.finished}


def batch_progress(*, batch_id: int) -> BatchProgress | None:
    """Two queries: the batch, and its parts counted in the database."""
    batch = ImportBatch.objects.filter(id=batch_id).first()
    if batch is None:
        return None
    parts = ImportBatchPart.objects.filter(batch_id=batch_id).aggregate(
        total=Count("id"),
        done=Count("id", filter=~Q(status=ImportBatchPart.Status.PENDING)),
        rows=Sum("row_count"),
    )
    finished = batch.status in FINISHED
    total = parts["total"] or 1
    done = parts["done"] if parts["total"] else 0
    if finished:
        done = total
    return BatchProgress(
        batch_id=batch.pk,
        kind=batch.kind,
        status=batch.status,
        parts_done=done,
        parts_total=total,
        rows=batch.row_count if finished else parts["rows"] or 0,
        error=batch.public_error,
        billing_periods=list(batch.billing_periods or []),
    )


def months_changed_by_batches(*, batch_ids: Iterable[int]) -> list[dt.date]:
    """The months (first days) the batches' settling recorded as changed for the pipeline."""
    rows = MonthChange.objects.filter(batch_id__in=list(batch_ids), start_pipeline=True)
    return sorted(set(rows.values_list("month", flat=True)))


def billing_months_settled() -> set[dt.date]:
    """The months the settled bill has line items in, from the settled billing batches'
    billing_periods (one small table), not a scan of the line items.

    The same set: a batch's rows are the bill only once it SUCCEEDED, and its billing_periods
    are then every month its rows are in (written in the transaction that settles it). Its rows
    of a month leave only with the batch (failed, superseded, deleted) or when a newer batch of
    the source holding rows of that month replaces them (services.billing._supersede), so the
    month stays. tests/ingest/test_billing_months_settled.py checks it against the scan."""
    periods = ImportBatch.objects.filter(
        kind=ImportBatch.Kind.BILLING, status=ImportBatch.Status.SUCCEEDED
    ).values_list("billing_periods", flat=True)
    return {month_from_label(label) for labels in periods for label in labels or []}
