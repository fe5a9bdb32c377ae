from django.apps import AppConfig


class RunMetricsConfig(AppConfig):
    # Training-run progress (DESIGN section 9): what each run bought, joined to its cost in the
    # attribution ledger at read time, so metrics that arrive before their jobs wait for them.
    name = "finops.run_metrics"
    label = "run_metrics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks in every process: an upload queues its import by name
        # (services.upload_metrics_ingest, finops.core.queue).
        from finops.run_metrics import tasks  # noqa: F401
