"""The pipeline's budgets step (finops.core.steps): evaluate the budgets a month's new ledger
touches, and send the alerts due (each once ever)."""

from __future__ import annotations

import datetime as dt

from finops.budgets.selectors import budget_ids_touching_month
from finops.budgets.series import last_ledger_day
from finops.budgets.services import Evaluation, budgets_evaluate_active
from finops.core.steps import StepResult


def evaluations_summary(evaluations: list[Evaluation]) -> dict[str, object]:
    """How many budgets were evaluated and which alerts were sent (JSON values)."""
    return {
        "budgets": len(evaluations),
        "alerts": [
            {"budget": a.budget_id, "kind": a.kind, "threshold": a.threshold}
            for e in evaluations
            for a in e.sent
        ],
    }


def budgets_month_step(month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Evaluate the active budgets whose period overlaps the month, as of the month's last
    ledger day. Re-running sends nothing new."""
    as_of = last_ledger_day(month=month)
    if as_of is None:
        return StepResult(month, {"budgets": 0, "alerts": []})
    ids = budget_ids_touching_month(month=month, as_of=as_of)
    evaluations = budgets_evaluate_active(as_of=as_of, budget_ids=ids)
    summary = evaluations_summary(evaluations)
    summary["as_of"] = as_of.isoformat()
    return StepResult(month, summary)
