"""Attribution tasks: thin wrappers that parse the month and call one service.

attribute_month is the pipeline's first step (finops.pipeline.steps): the pipeline runs it, then
the steps that read the new ledger. Called on its own it rebuilds the ledger and nothing else.
"""

from __future__ import annotations

from celery import shared_task

from billing_ingest.months import month_parse
from finops.attribution.services import attribution_run

# The benchmark month (744k line items, 300k jobs) attributes in about a minute; the limits leave
# room for a much larger month while still killing a run that hangs.
SOFT_TIME_LIMIT = 30 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60


@shared_task(
    name="finops.attribution.tasks.attribute_month",
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def attribute_month(month: str, pipeline_run_id: int | None = None) -> dict[str, object]:
    """Attribute one billing month ("YYYY-MM"). Idempotent: a re-run replaces the month's rows.
    A failed run raises (the run is recorded FAILED, the month keeps its previous ledger)."""
    run = attribution_run(month=month_parse(month))
    return {
        "attribution_run": run.pk,
        "month": month,
        "status": run.status,
        "line_items": run.line_items,
        "jobs": run.jobs,
    }
