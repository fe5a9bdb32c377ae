from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "finops.notifications"
    label = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the tasks in every process, not only in workers: services queue them by
        # name (finops/notifications/enqueue.py), which an eager Celery can only run inline when the
        # name is registered here.
        from finops.notifications import tasks  # noqa: F401
