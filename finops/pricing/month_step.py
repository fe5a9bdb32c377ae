"""The pipeline's recommendations step (finops.core.steps), last: advice never holds up an
alert."""

from __future__ import annotations

import datetime as dt

from finops.core.steps import StepResult
from finops.pricing.recommendations import recommendations_refresh
from finops.pricing.services import team_usage_store


def recommendations_month_step(month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Store the month's usage per team and instance type (what the pricing page reads), and
    compute and store the month's recommendations (a re-run replaces the figures, keeping each
    action's status and comment)."""
    usage = team_usage_store(month=month)
    return StepResult(
        month, {"usage_rows": usage, "recommendations": recommendations_refresh(month=month)}
    )
