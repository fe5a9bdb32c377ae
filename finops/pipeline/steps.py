"""The pipeline, declared once: what runs, in order, after a billing month's data changed.

    batch settled (billing_ingest: MonthChange rows)  ->  attribute the month  ->  run
    economics  ->  endpoint costs  ->  budgets  ->  anomalies  ->  recommendations

Each step is a plain function ``(month: date, pipeline_run_id: int | None) -> StepResult``
(finops.core.steps), in its app's ``month_step.py``; idempotent (a re-run replaces what it
wrote), it raises on failure. The pipeline runs the steps one after another (finops.pipeline.tasks:
a Celery chain of run_step, which calls the step function), records each one's status, start, end
and error (PipelineStep), retries a step on transient errors only (a dropped database connection,
an unreachable broker or SMTP server), and stops at the first step that fails. Each step also has
a Celery task of its own (``task``, its explicit name) that runs it alone, and whose time limits
the pipeline gives the step. Adding a step is one entry in STEPS and one call in step_run; runs
already recorded keep the steps they started with.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from finops.anomalies.month_step import anomalies_month_step
from finops.attribution.month_step import attribution_month_step
from finops.budgets.month_step import budgets_month_step
from finops.core.pipeline_wake import ECONOMICS_REFRESH_TASK
from finops.core.steps import StepFunction, StepResult
from finops.economics.month_step import economics_month_step
from finops.inference.month_step import endpoint_costs_month_step
from finops.pricing.month_step import recommendations_month_step


@dataclass(frozen=True)
class Step:
    key: str  # stable name, stored on PipelineStep
    run: StepFunction  # the step itself
    task: str  # the Celery task that runs it alone (stored; its time limits are the step's)
    label: str  # shown on the pipeline page


STEPS: tuple[Step, ...] = (
    Step(
        "attribute",
        attribution_month_step,
        "finops.attribution.tasks.attribute_month",
        "Attribute the month",
    ),
    # After attribution (it reads the month's RunCost rows and ledger), before the steps and
    # pages that read the stored waste, energy and efficiency.
    Step(
        "run_economics",
        economics_month_step,
        ECONOMICS_REFRESH_TASK,
        "Run economics (waste, energy, efficiency)",
    ),
    Step(
        "endpoint_costs",
        endpoint_costs_month_step,
        "finops.inference.tasks.rebuild_endpoint_costs",
        "Endpoint costs",
    ),
    Step(
        "budgets",
        budgets_month_step,
        "finops.budgets.tasks.evaluate_budgets_for_month",
        "Budgets and alerts",
    ),
    Step(
        "anomalies",
        anomalies_month_step,
        "finops.anomalies.tasks.detect_anomalies_for_month",
        "Anomalies",
    ),
    # Last: advice never holds up an alert.
    Step(
        "recommendations",
        recommendations_month_step,
        "finops.pricing.tasks.refresh_recommendations_for_month",
        "Recommendations",
    ),
)

STEP_LABELS = {step.key: step.label for step in STEPS}
STEPS_BY_KEY = {step.key: step for step in STEPS}


class UnknownStepError(LookupError):
    """A recorded step whose key is no longer defined here."""


def step_run(key: str, month: dt.date, pipeline_run_id: int | None) -> StepResult:
    """Run the step recorded as ``key`` for the month: one plain call per step, in the
    pipeline's order, so a reader (and mypy) follows the month from here into each app."""
    if key == "attribute":
        return attribution_month_step(month, pipeline_run_id)
    if key == "run_economics":
        return economics_month_step(month, pipeline_run_id)
    if key == "endpoint_costs":
        return endpoint_costs_month_step(month, pipeline_run_id)
    if key == "budgets":
        return budgets_month_step(month, pipeline_run_id)
    if key == "anomalies":
        return anomalies_month_step(month, pipeline_run_id)
    if key == "recommendations":
        return recommendations_month_step(month, pipeline_run_id)
    raise UnknownStepError(f"step {key!r} is no longer defined (finops.pipeline.steps)")
