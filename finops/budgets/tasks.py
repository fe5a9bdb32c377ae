"""Budget evaluation tasks: thin, idempotent (an alert is raised once ever), time-limited."""

from __future__ import annotations

from datetime import date

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from finops.budgets.enqueue import REFRESH_BUDGET_EVALUATION_TASK
from finops.budgets.month_step import budgets_month_step, evaluations_summary
from finops.budgets.services import budget_evaluation_refresh, budgets_evaluate_active
from finops.core.months import month_parse


@shared_task(
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=5,
    soft_time_limit=600,
    time_limit=660,
)
def evaluate_budgets_for_month(month: str, pipeline_run_id: int | None = None) -> dict[str, object]:
    """After `month` (YYYY-MM) was attributed: evaluate the active budgets whose period overlaps
    it, as of the month's last ledger day (the pipeline's budgets step). Re-running sends
    nothing new."""
    return budgets_month_step(month_parse(month), pipeline_run_id).task_result()


@shared_task(
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=5,
    soft_time_limit=600,
    time_limit=660,
)
def check_budgets(as_of: str | None = None) -> dict[str, object]:
    """Evaluate every active budget for the period containing as_of (default today, UTC)."""
    day = date.fromisoformat(as_of) if as_of else timezone.now().date()
    result = evaluations_summary(budgets_evaluate_active(as_of=day))
    result["as_of"] = day.isoformat()
    return result


@shared_task(
    name=REFRESH_BUDGET_EVALUATION_TASK,
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=5,
    soft_time_limit=120,
    time_limit=150,
)
def refresh_budget_evaluation(budget_id: int) -> str | None:
    """After a budget was saved: store its status as of its newest ledger day (no alerts)."""
    stored = budget_evaluation_refresh(budget_id=budget_id)
    return stored.status if stored is not None else None
