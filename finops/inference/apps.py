from typing import Any

from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "finops.inference"
    label = "inference"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Endpoint costs are read off the ledger: rebuild them whenever a month is re-attributed.
        from finops.attribution.signals import month_attributed

        month_attributed.connect(_rebuild_endpoint_costs, dispatch_uid="inference-endpoint-costs")


def _rebuild_endpoint_costs(sender: object, *, month: Any, **kwargs: Any) -> None:
    from finops.inference.services import endpoint_costs_rebuild

    endpoint_costs_rebuild(month=month)
