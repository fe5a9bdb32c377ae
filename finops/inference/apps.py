from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "finops.inference"
    label = "inference"
    default_auto_field = "django.db.models.BigAutoField"
