"""Budget evaluation tasks: thin, idempotent (an alert is raised once ever), time-limited."""

from __future__ import annotations

from datetime import date

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from finops.budgets.enqueue import REFRESH_BUDGET_EVALUATION_TASK
from finops.budgets.models import Budget
from finops.budgets.selectors import budget_period
from finops.budgets.series import last_ledger_day
from finops.budgets.services import budget_evaluation_refresh, budgets_evaluate_active
from finops.core.months import month_add


def _summary(evaluations: list) -> dict[str, object]:
    return {
        "budgets": len(evaluations),
        "alerts": [
            {"budget": a.budget_id, "kind": a.kind, "threshold": a.threshold}
            for e in evaluations
            for a in e.sent
        ],
    }


@shared_task(
    autoretry_for=(OperationalError,),
    retry_backoff=30,
    max_retries=5,
    soft_time_limit=600,
    time_limit=660,
)
def evaluate_budgets_for_month(month: str, pipeline_run_id: int | None = None) -> dict[str, object]:
    """After `month` (YYYY-MM) was attributed: evaluate the active budgets whose period overlaps
    it, as of the month's last ledger day. Re-running sends nothing new."""
    first = date.fromisoformat(f"{month}-01")
    as_of = last_ledger_day(month=first)
    if as_of is None:
        return {"budgets": 0, "alerts": [], "month": month}
    last = month_add(first, 1)
    ids = [
        b.pk
        for b in Budget.objects.filter(active=True)
        if budget_period(budget=b, day=as_of).overlaps(first, last)
    ]
    result = _summary(budgets_evaluate_active(as_of=as_of, budget_ids=ids))
    result["month"] = month
    result["as_of"] = as_of.isoformat()
    return result


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
    result = _summary(budgets_evaluate_active(as_of=day))
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
