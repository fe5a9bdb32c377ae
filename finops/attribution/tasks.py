"""Attribution tasks: thin wrappers that parse the month and call one service.

attribute_month is the pipeline's first step (finops.pipeline.steps): the pipeline runs it, then
the steps that read the new ledger. Called on its own it rebuilds the ledger and nothing else.
With more than one part wanted (settings.FINOPS_ATTRIBUTION_PARTS, or "auto": one per
FINOPS_ATTRIBUTION_PART_LINE_ITEMS line items) and a broker (not eager), it splits the month across
workers: a chord of attribution_month_part tasks, then attribution_month_reduce (the one
conservation check and the rollups), and returns at once without waiting (STEP_WAITING): no
worker sleeps on the chord. When the reduce has committed (or failed), it sends
finops.pipeline.resume by name, which carries the pipeline on. Eager (the embedded default), the
month is attributed in this process.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from celery import Task, chord, current_app, shared_task
from celery.result import AsyncResult
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from finops.attribution.inputs.month import MonthScope, ResourceRange
from finops.attribution.ledger import staging
from finops.attribution.models import AttributionRun
from finops.attribution.services import (
    attribution_month_part,
    attribution_month_parts_count,
    attribution_month_parts_failed,
    attribution_month_plan,
    attribution_month_reduce,
    attribution_month_run,
    attribution_month_scope,
    attribution_month_stages_drop,
)
from finops.core.months import month_parse
from finops.core.pipeline_wake import STEP_WAITING, pipeline_resume_send

logger = logging.getLogger(__name__)

# The benchmark month (744k line items, 300k jobs) attributes in about half a minute; the limits
# leave room for a much larger month while still killing a run that hangs.
SOFT_TIME_LIMIT = 30 * 60
TIME_LIMIT = SOFT_TIME_LIMIT + 5 * 60
_ACKS: dict[str, Any] = {"acks_late": True, "reject_on_worker_lost": True}
# A dropped database connection in a part or the reduce: the same task again, a little later.
TRANSIENT_RETRIES = 3
TRANSIENT_BACKOFF = 5


@shared_task(
    name="finops.attribution.tasks.attribute_month",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    **_ACKS,
)
def attribute_month(month: str, pipeline_run_id: int | None = None) -> dict[str, object]:
    """Attribute one billing month ("YYYY-MM"). Idempotent: a re-run replaces the month's rows.
    A failed run raises (the run is recorded FAILED, the month keeps its previous ledger).
    Split in parts (module docstring), it returns once the chord is queued: the summary says
    STEP_WAITING and names the reduce task; the ledger is written when the reduce ends."""
    parts = 1 if current_app.conf.task_always_eager else _parts_wanted(month)
    if parts <= 1:
        return _summary(attribution_month_run(month=month_parse(month)), month)
    reduce = attribution_month_split(month, parts, pipeline_run_id)
    return {"month": month, "parts": parts, "reduce": reduce.id, STEP_WAITING: True}


def _parts_wanted(month: str) -> int:
    """settings.FINOPS_ATTRIBUTION_PARTS, or with "auto" (None) as many as the month's line
    items need at FINOPS_ATTRIBUTION_PART_LINE_ITEMS each."""
    if settings.FINOPS_ATTRIBUTION_PARTS is not None:
        return settings.FINOPS_ATTRIBUTION_PARTS
    return attribution_month_parts_count(
        month=month_parse(month), line_items_per_part=settings.FINOPS_ATTRIBUTION_PART_LINE_ITEMS
    )


def attribution_month_split(
    month: str, parts: int, pipeline_run_id: int | None = None
) -> AsyncResult[dict[str, object]]:
    """Queue the month as a chord on the workers and return its reduce's result, not waiting
    for it. With a pipeline run, the reduce resumes that run when it ends."""
    plan = attribution_month_plan(month=month_parse(month), parts=parts)
    # Names the parts' staging tables (PostgreSQL: staging.py), which the reduce drops.
    stage = staging.stage_new(month_parse(month))
    # Read once here rather than by every part.
    scope = attribution_month_scope(month=month_parse(month), plan=plan)
    state = None if scope is None else scope.state()
    header = [
        attribution_month_part_task.s(month, part.first, part.stop, stage, state) for part in plan
    ]
    body = attribution_month_reduce_task.s(month, pipeline_run_id, stage)
    result: AsyncResult[dict[str, object]] = chord(header)(body)
    return result


@shared_task(
    bind=True,
    name="finops.attribution.tasks.attribution_month_part",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    max_retries=TRANSIENT_RETRIES,
    **_ACKS,
)
def attribution_month_part_task(
    self: Task,
    month: str,
    first: str | None,
    stop: str | None,
    stage: str | None = None,
    scope: list[Any] | None = None,
) -> str | dict[str, str]:
    """One part of a month (services.attribution_month_part), as text for the result backend.
    A part that fails returns {"error": ...} rather than raising, so the chord still reaches
    its reduce, which records the run FAILED (the month keeps its previous ledger) and tells
    the pipeline; a transient database error is retried first."""
    try:
        data = attribution_month_part(
            month=month_parse(month),
            part=ResourceRange(first, stop),
            stage=stage,
            scope=None if scope is None else MonthScope.from_state(scope),
        )
    except (OperationalError, InterfaceError) as exc:
        connection.close()
        if self.request.retries < TRANSIENT_RETRIES:
            raise self.retry(exc=exc, countdown=TRANSIENT_BACKOFF) from None
        return _part_error(month, first, exc)
    except Exception as exc:
        return _part_error(month, first, exc)
    return base64.b64encode(data).decode("ascii")


def _part_error(month: str, first: str | None, exc: Exception) -> dict[str, str]:
    logger.exception("attribution of %s: the part from %s failed", month, first or "the start")
    return {"error": f"part from {first or 'the start'}: {type(exc).__name__}: {exc}"}


@shared_task(
    bind=True,
    name="finops.attribution.tasks.attribution_month_reduce",
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
    max_retries=TRANSIENT_RETRIES,
    **_ACKS,
)
def attribution_month_reduce_task(
    self: Task,
    parts: list[str | dict[str, str]],
    month: str,
    pipeline_run_id: int | None = None,
    stage: str | None = None,
) -> dict[str, object]:
    """The chord's body: merge the parts, check conservation, write the ledger and rollups;
    then resume the pipeline run (once the ledger has committed), or fail it with the error.
    Redelivered, it writes the same ledger again and its resume finds nothing left to claim."""
    errors = [part["error"] for part in parts if isinstance(part, dict)]
    try:
        if errors:
            attribution_month_parts_failed(month=month_parse(month), errors=errors, stage=stage)
        data = (base64.b64decode(part) for part in parts if isinstance(part, str))
        run = attribution_month_reduce(month=month_parse(month), parts=data, stage=stage)
    except (OperationalError, InterfaceError) as exc:
        connection.close()
        if self.request.retries < TRANSIENT_RETRIES:
            raise self.retry(exc=exc, countdown=TRANSIENT_BACKOFF) from None
        attribution_month_stages_drop(stage=stage)  # kept for the retries: none left
        _resume(pipeline_run_id, f"{type(exc).__name__}: {exc}")
        raise
    except Exception as exc:
        _resume(pipeline_run_id, f"{type(exc).__name__}: {exc}")
        raise
    _resume(pipeline_run_id, "")
    return _summary(run, month)


def _resume(pipeline_run_id: int | None, error: str) -> None:
    if pipeline_run_id is not None:
        pipeline_resume_send(run_id=pipeline_run_id, error=error)


def _summary(run: AttributionRun, month: str) -> dict[str, object]:
    return {
        "attribution_run": run.pk,
        "month": month,
        "status": run.status,
        "line_items": run.line_items,
        "jobs": run.jobs,
    }
