"""The pipeline, declared once: what runs, in order, after a billing month's data changed.

    batch settled (billing_ingest: MonthChange rows)  ->  attribute the month  ->  endpoint
    costs  ->  budgets  ->  anomalies  ->  recommendations

Each step is a Celery task taking ``(month: str, pipeline_run_id: int)`` (month "YYYY-MM"),
idempotent (a re-run replaces what it wrote), that raises on failure. The pipeline runs the
steps one after another (finops.pipeline.tasks: a Celery chain of run_step), records each one's
status, start, end and error (PipelineStep), retries a step on transient errors only (a dropped
database connection, an unreachable broker or SMTP server), and stops at the first step that
fails. Adding a step is one entry here; runs already recorded keep the steps they started with.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    key: str  # stable name, stored on PipelineStep
    task: str  # dotted path of the Celery task
    label: str  # shown on the pipeline page


STEPS: tuple[Step, ...] = (
    Step("attribute", "finops.attribution.tasks.attribute_month", "Attribute the month"),
    Step("endpoint_costs", "finops.inference.tasks.rebuild_endpoint_costs", "Endpoint costs"),
    Step("budgets", "finops.budgets.tasks.evaluate_budgets_for_month", "Budgets and alerts"),
    Step("anomalies", "finops.anomalies.tasks.detect_anomalies_for_month", "Anomalies"),
    # Last: advice never holds up an alert.
    Step(
        "recommendations",
        "finops.pricing.tasks.refresh_recommendations_for_month",
        "Recommendations",
    ),
)

STEP_LABELS = {step.key: step.label for step in STEPS}
