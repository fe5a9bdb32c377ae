from django.apps import AppConfig


class ChargebackConfig(AppConfig):
    name = "finops.chargeback"
    label = "chargeback"
    default_auto_field = "django.db.models.BigAutoField"
