from django.apps import AppConfig


class AttributionConfig(AppConfig):
    name = "finops.attribution"
    label = "attribution"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: the attribution step queues
        # its parts and reduce by name (month_step.py, finops.core.queue).
        from finops.attribution import tasks  # noqa: F401
