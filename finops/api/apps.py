from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "finops.api"
    label = "api"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from finops.api.cache import connect_signals

        connect_signals()
