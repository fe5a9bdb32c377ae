"""The pipeline's recommendations step (finops.core.steps), last: advice never holds up an
alert."""

from __future__ import annotations

import datetime as dt

from finops.core.steps import StepResult
from finops.pricing.recommendations import recommendations_refresh


def recommendations_month_step(month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Compute and store the month's recommendations (a re-run replaces the figures, keeping
    each action's status and comment)."""
    return StepResult(month, {"recommendations": recommendations_refresh(month=month)})
