"""Attribution tasks: thin wrappers that parse the month and call one service.

attribute_month runs the pipeline's first step (month_step.attribution_month_step) on its own:
it rebuilds the ledger and nothing else (the pipeline calls the step function itself). The
split of a month in parts (month_step.py) runs here: attribution_month_part for each part, then
attribution_month_reduce, which resumes the pipeline run by name when the ledger has committed.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError, connection

from finops.attribution.inputs.month import MonthScope, ResourceRange
from finops.attribution.month_step import (
    ATTRIBUTION_PART_TASK,
    ATTRIBUTION_REDUCE_TASK,
    attribution_month_step,
    attribution_run_summary,
)
from finops.attribution.services import (
    attribution_month_part,
    attribution_month_parts_failed,
    attribution_month_reduce,
    attribution_month_stages_drop,
)
from finops.core.months import month_parse
from finops.core.pipeline_wake import pipeline_resume_send

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
    """Attribute one billing month ("YYYY-MM"): the pipeline's attribution step as a task; a
    split month returns STEP_WAITING and the reduce task's id (month_step.py)."""
    return attribution_month_step(month_parse(month), pipeline_run_id).task_result()


@shared_task(
    bind=True,
    name=ATTRIBUTION_PART_TASK,
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
    name=ATTRIBUTION_REDUCE_TASK,
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
    return {"month": month, **attribution_run_summary(run)}


def _resume(pipeline_run_id: int | None, error: str) -> None:
    if pipeline_run_id is not None:
        pipeline_resume_send(run_id=pipeline_run_id, error=error)
