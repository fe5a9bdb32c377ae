from django.apps import AppConfig


class BillingIngestConfig(AppConfig):
    name = "billing_ingest"
    default_auto_field = "django.db.models.BigAutoField"
