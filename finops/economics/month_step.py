"""The pipeline's run-economics step (finops.core.steps): after attribution, store each run's
waste by cause, energy and efficiency for the month (finops.economics.services)."""

from __future__ import annotations

import datetime as dt

from finops.core.steps import StepResult
from finops.economics.services import economics_refresh


def economics_month_step(month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Rebuild the month's RunEconomics rows; idempotent."""
    return StepResult(month, economics_refresh(month=month))
