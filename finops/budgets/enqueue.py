"""Queue budget tasks by name, so that services never import tasks.

Tasks import services (they are thin: take an id, call one service); a service that queues a
task after its commit would otherwise import tasks back. Sending by the registered name keeps
the imports one-way (tasks -> services -> this module); the name is registered in every process
(BudgetsConfig.ready), so an eager Celery still runs it inline.
"""

from __future__ import annotations

from finops.core.queue import task_send

REFRESH_BUDGET_EVALUATION_TASK = "finops.budgets.tasks.refresh_budget_evaluation"


def budget_evaluation_refresh_enqueue(*, budget_id: int) -> None:
    """Queue `refresh_budget_evaluation` for this budget."""
    task_send(REFRESH_BUDGET_EVALUATION_TASK, budget_id)
