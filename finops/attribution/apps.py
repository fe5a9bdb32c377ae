from django.apps import AppConfig


class AttributionConfig(AppConfig):
    name = "finops.attribution"
    label = "attribution"
    default_auto_field = "django.db.models.BigAutoField"
