from django.apps import AppConfig


class EconomicsConfig(AppConfig):
    # The stored run-economics rollup (RunEconomics): what each run's cost bought, wasted and
    # burned per month, written after attribution from the read-time formulas of run_metrics,
    # waste and energy, read by the runs browser, the team trend and /metrics.
    name = "finops.economics"
    label = "economics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registered in every process: the run-metrics and energy imports send the refresh by
        # task name (finops.core.pipeline_wake), which an eager Celery runs only when known.
        from finops.economics import tasks  # noqa: F401
