"""The pipeline's step contract: a step is a plain function of the month that returns a
StepResult.

    def step(month: dt.date, pipeline_run_id: int | None) -> StepResult

``month`` is the first day of the billing month (finops.core.months), the one form a month takes
from the pipeline to every step; ``pipeline_run_id`` is the run that called it (None when a task
or command runs the step on its own). A step is idempotent (a re-run replaces what it wrote) and
raises on failure. A step that hands its work to other tasks (attribution split into parts)
returns ``waiting=True``: the pipeline leaves it WAITING, and the last of those tasks resumes the
run (finops.core.pipeline_wake.pipeline_resume_send).

The steps, in order, are declared once in finops.pipeline.steps; each app's step lives in its
``month_step.py``; a test pins every step's signature.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from finops.core.months import month_format
from finops.core.pipeline_wake import STEP_WAITING


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step did: its month, its figures (JSON values, for the log and the task's
    result) and whether it handed its work to other tasks."""

    month: dt.date
    summary: Mapping[str, object] = field(default_factory=dict)
    waiting: bool = False

    def task_result(self) -> dict[str, object]:
        """The result as the step's Celery task returns it: the summary, the month as
        "YYYY-MM", and STEP_WAITING when the step is waiting."""
        result: dict[str, object] = {"month": month_format(self.month), **self.summary}
        if self.waiting:
            result[STEP_WAITING] = True
        return result


class StepFunction(Protocol):
    """The signature every pipeline step has (finops.pipeline.steps.STEPS)."""

    def __call__(self, month: dt.date, pipeline_run_id: int | None) -> StepResult: ...
