from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "finops.budgets"
    label = "budgets"
    default_auto_field = "django.db.models.BigAutoField"
