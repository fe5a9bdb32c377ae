from django.apps import AppConfig


class TokensConfig(AppConfig):
    name = "finops.tokens"
    label = "tokens"
    default_auto_field = "django.db.models.BigAutoField"
