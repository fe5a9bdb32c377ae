from django.apps import AppConfig


class PricingConfig(AppConfig):
    name = "finops.pricing"
    label = "pricing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Attribution asks for on-demand prices of lines without ListCost through this hook
        # (imports flow attribution <- pricing, never back): refreshed prices, else the snapshot.
        from finops.attribution.inputs.list_cost import register_list_price_source
        from finops.pricing.prices import on_demand_hour_price

        register_list_price_source(on_demand_hour_price)
