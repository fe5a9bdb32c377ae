from django.apps import AppConfig


class AnomaliesConfig(AppConfig):
    name = "finops.anomalies"
    label = "anomalies"
    default_auto_field = "django.db.models.BigAutoField"
