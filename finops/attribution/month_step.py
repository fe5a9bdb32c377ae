"""The pipeline's attribution step (finops.core.steps), the first: write the month's ledger.

With more than one part wanted (settings.FINOPS_ATTRIBUTION_PARTS, or "auto": one per
FINOPS_ATTRIBUTION_PART_LINE_ITEMS line items) and a broker (not eager), the month is split across
workers: a chord of attribution_month_part tasks, then attribution_month_reduce (the one
conservation check and the rollups), queued by name (finops.core.queue); the step returns at once,
waiting, and no worker sleeps on the chord. When the reduce has committed (or failed), it sends
finops.pipeline.resume by name, which carries the pipeline on. Eager (the embedded default), the
month is attributed in this process.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from celery import current_app
from celery.result import AsyncResult
from django.conf import settings

from finops.attribution.inputs.month import MonthScope
from finops.attribution.ledger import staging
from finops.attribution.models import AttributionRun
from finops.attribution.services import (
    attribution_month_parts_count,
    attribution_month_plan,
    attribution_month_run,
    attribution_month_scope,
)
from finops.core.months import month_format
from finops.core.queue import task_signature, tasks_chord_send
from finops.core.steps import StepResult

ATTRIBUTION_PART_TASK = "finops.attribution.tasks.attribution_month_part"
ATTRIBUTION_REDUCE_TASK = "finops.attribution.tasks.attribution_month_reduce"


def attribution_month_step(month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Attribute the month. Idempotent: a re-run replaces the month's rows. A failed run raises
    (the run is recorded FAILED, the month keeps its previous ledger). Split in parts (module
    docstring), it returns once the chord is queued, waiting, naming the reduce task; the ledger
    is written when the reduce ends."""
    parts = 1 if current_app.conf.task_always_eager else attribution_parts_wanted(month)
    if parts <= 1:
        return StepResult(month, attribution_run_summary(attribution_month_run(month=month)))
    reduce = attribution_month_split(month, parts, pipeline_run_id)
    return StepResult(month, {"parts": parts, "reduce": reduce.id}, waiting=True)


def attribution_parts_wanted(month: dt.date) -> int:
    """settings.FINOPS_ATTRIBUTION_PARTS, or with "auto" (None) as many as the month's line
    items need at FINOPS_ATTRIBUTION_PART_LINE_ITEMS each."""
    if settings.FINOPS_ATTRIBUTION_PARTS is not None:
        return int(settings.FINOPS_ATTRIBUTION_PARTS)
    return attribution_month_parts_count(
        month=month, line_items_per_part=settings.FINOPS_ATTRIBUTION_PART_LINE_ITEMS
    )


def attribution_month_split(
    month: dt.date, parts: int, pipeline_run_id: int | None = None
) -> AsyncResult[Any]:
    """Queue the month as a chord on the workers and return its reduce's result, not waiting
    for it. With a pipeline run, the reduce resumes that run when it ends."""
    plan = attribution_month_plan(month=month, parts=parts)
    # Names the parts' staging tables (PostgreSQL: ledger/staging.py), which the reduce drops.
    stage = staging.stage_new(month)
    # Read once here rather than by every part.
    scope: MonthScope | None = attribution_month_scope(month=month, plan=plan)
    state = None if scope is None else scope.state()
    label = month_format(month)
    header = [
        task_signature(ATTRIBUTION_PART_TASK, label, part.first, part.stop, stage, state)
        for part in plan
    ]
    body = task_signature(ATTRIBUTION_REDUCE_TASK, label, pipeline_run_id, stage)
    return tasks_chord_send(header, body)


def attribution_run_summary(run: AttributionRun) -> dict[str, object]:
    """What the run wrote (JSON values; the month is the StepResult's)."""
    return {
        "attribution_run": run.pk,
        "status": run.status,
        "line_items": run.line_items,
        "jobs": run.jobs,
    }
