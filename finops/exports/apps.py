from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "finops.exports"
    label = "exports"
    default_auto_field = "django.db.models.BigAutoField"
