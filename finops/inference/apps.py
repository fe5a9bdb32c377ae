from django.apps import AppConfig


class InferenceConfig(AppConfig):
    # Endpoint costs are read off the ledger: the pipeline (finops.pipeline.steps) rebuilds them
    # right after each attribution of a month.
    name = "finops.inference"
    label = "inference"
    default_auto_field = "django.db.models.BigAutoField"
