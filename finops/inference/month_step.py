"""The pipeline's endpoint-costs step (finops.core.steps): rebuild a month's EndpointCost rows
from its new ledger."""

from __future__ import annotations

import datetime as dt

from finops.core.steps import StepResult
from finops.inference.services import endpoint_costs_rebuild


def endpoint_costs_month_step(month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Rebuild the month's EndpointCost rows; idempotent."""
    return StepResult(month, {"endpoint_costs": endpoint_costs_rebuild(month=month)})
