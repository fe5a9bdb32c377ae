from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "finops.pipeline"
    label = "pipeline"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: billing_ingest wakes the
        # pipeline by task name (finops.core.pipeline_wake), which an eager Celery can only
        # run inline when the name is registered here.
        from finops.pipeline import tasks  # noqa: F401
