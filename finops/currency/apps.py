from django.apps import AppConfig


class CurrencyConfig(AppConfig):
    name = "finops.currency"
    label = "currency"
    default_auto_field = "django.db.models.BigAutoField"
