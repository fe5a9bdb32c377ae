"""Export tasks: the ledger written back out as standard files (thin: call the writer)."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from celery import shared_task
from django.conf import settings

from finops.core.money import decimal_text
from finops.core.months import month_format, month_parse
from finops.exports.writer import focus_month_export

__all__ = ["export_focus_month"]


# What export_focus_month returns. "billed" (a published key, kept) is the sum of BilledCost
# (invoiced) and "effective" of EffectiveCost (amortised), per currency, as decimal text.
ExportTaskResult = TypedDict(  # noqa: UP013 (the key "billed" is data, not a name)
    "ExportTaskResult",
    {
        "month": str,
        "out": str,
        "format": str,
        "rows": int,
        "billed": dict[str, str],
        "effective": dict[str, str],
    },
)


@shared_task(
    name="finops.exports.tasks.export_focus_month",
    acks_late=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def export_focus_month(month: str, out: str) -> ExportTaskResult:
    """Write billing month `month` ("YYYY-MM") to `out` (.parquet or .csv, a path on the
    worker's file system) as FOCUS 1.2. Idempotent: a re-run replaces the file atomically."""
    result = focus_month_export(month=month_parse(month), out=Path(out))
    return {
        "month": month_format(result.month),
        "out": str(result.path),
        "format": result.file_format,
        "rows": result.rows,
        "billed": {currency: decimal_text(total) for currency, total in result.invoiced.items()},
        "effective": {
            currency: decimal_text(total) for currency, total in result.effective.items()
        },
    }
