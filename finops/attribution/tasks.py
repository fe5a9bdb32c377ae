"""Attribution tasks: thin wrappers that parse the month and call one service.

attribute_month is the pipeline's first step (finops.pipeline.steps): the pipeline runs it, then
the steps that read the new ledger. Called on its own it rebuilds the ledger and nothing else.
With settings.FINOPS_ATTRIBUTION_PARTS > 1 and a broker (not eager), it splits the month across
workers: a chord of attribution_month_part tasks, then attribution_month_reduce (the one
conservation check and the rollups), and waits for it. Eager (the embedded default), the month
is attributed in this process.
"""

from __future__ import annotations

import base64
from typing import Any

from celery import chord, current_app, shared_task
from django.conf import settings

from billing_ingest.months import month_parse
from finops.attribution.inputs import ResourceRange
from finops.attribution.models import AttributionRun
from finops.attribution.services import (
    attribution_month_part,
    attribution_month_plan,
    attribution_month_reduce,
    attribution_month_run,
)

# The benchmark month (744k line items, 300k jobs) attributes in about half a minute; the limits
# leave room for a much larger month while still killing a run that hangs.
SOFT_TIME_LIMIT = 30 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60
_ACKS: dict[str, Any] = {"acks_late": True, "reject_on_worker_lost": True}


@shared_task(
    name="finops.attribution.tasks.attribute_month",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    **_ACKS,
)
def attribute_month(month: str, pipeline_run_id: int | None = None) -> dict[str, object]:
    """Attribute one billing month ("YYYY-MM"). Idempotent: a re-run replaces the month's rows.
    A failed run raises (the run is recorded FAILED, the month keeps its previous ledger)."""
    parts = settings.FINOPS_ATTRIBUTION_PARTS
    if parts <= 1 or current_app.conf.task_always_eager:
        return _summary(attribution_month_run(month=month_parse(month)), month)
    return attribution_month_split(month, parts)


def attribution_month_split(month: str, parts: int) -> dict[str, object]:
    """The month as a chord on the workers, waited for (the caller holds a worker slot while
    it sleeps here: give workers one process more than their cores when parts > 1)."""
    plan = attribution_month_plan(month=month_parse(month), parts=parts)
    header = [attribution_month_part_task.s(month, part.first, part.stop) for part in plan]
    result = chord(header)(attribution_month_reduce_task.s(month))
    summary: dict[str, object] = result.get(timeout=TIME_LIMIT, disable_sync_subtasks=False)
    return summary


@shared_task(
    name="finops.attribution.tasks.attribution_month_part",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    **_ACKS,
)
def attribution_month_part_task(month: str, first: str | None, stop: str | None) -> str:
    """One part of a month (services.attribution_month_part), as text for the result backend."""
    data = attribution_month_part(month=month_parse(month), part=ResourceRange(first, stop))
    return base64.b64encode(data).decode("ascii")


@shared_task(
    name="finops.attribution.tasks.attribution_month_reduce",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    **_ACKS,
)
def attribution_month_reduce_task(parts: list[str], month: str) -> dict[str, object]:
    """The chord's body: merge the parts, check conservation, write the ledger and rollups."""
    data = [base64.b64decode(part) for part in parts]
    return _summary(attribution_month_reduce(month=month_parse(month), parts=data), month)


def _summary(run: AttributionRun, month: str) -> dict[str, object]:
    return {
        "attribution_run": run.pk,
        "month": month,
        "status": run.status,
        "line_items": run.line_items,
        "jobs": run.jobs,
    }
