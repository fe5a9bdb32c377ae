from django.apps import AppConfig


class OrgConfig(AppConfig):
    name = "finops.org"
    label = "org"
    default_auto_field = "django.db.models.BigAutoField"
