from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "finops.demo"
    label = "demo"
