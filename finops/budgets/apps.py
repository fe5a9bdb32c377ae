from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "finops.budgets"
    label = "budgets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: services queue them by
        # name (finops/budgets/enqueue.py), which an eager Celery can only run inline when the
        # name is registered here.
        from finops.budgets import tasks  # noqa: F401
