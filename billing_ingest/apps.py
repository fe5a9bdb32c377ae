from django.apps import AppConfig


class BillingIngestConfig(AppConfig):
    name = "billing_ingest"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: services queue them by
        # name (billing_ingest/services/dispatch.py), which an eager Celery can only run inline
        # when the name is registered here.
        from billing_ingest import tasks  # noqa: F401
