"""Reads for the pipeline page and the attribute command."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Max, Prefetch

from finops.pipeline.models import PipelineRun, PipelineStep
from finops.pipeline.steps import STEP_LABELS


@dataclass(frozen=True)
class StepView:
    step: PipelineStep
    label: str


def pipeline_last_runs(*, limit: int = 36) -> list[tuple[PipelineRun, list[StepView]]]:
    """Each month's newest run (newest month first) with its steps in order."""
    last_ids = (
        PipelineRun.objects.values("month").annotate(last=Max("id")).values_list("last", flat=True)
    )
    runs = (
        PipelineRun.objects.filter(id__in=list(last_ids))
        .order_by("-month")
        .prefetch_related(Prefetch("steps", queryset=PipelineStep.objects.order_by("index")))
    )[:limit]
    return [(run, pipeline_step_views(run)) for run in runs]


def pipeline_step_views(run: PipelineRun) -> list[StepView]:
    return [StepView(step, STEP_LABELS.get(step.key, step.key)) for step in run.steps.all()]


def pipeline_run_month(*, run_id: int) -> dt.date:
    """The month (first day) a run is for."""
    month: dt.date = PipelineRun.objects.values_list("month", flat=True).get(pk=run_id)
    return month
