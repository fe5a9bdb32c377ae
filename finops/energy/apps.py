from django.apps import AppConfig


class EnergyConfig(AppConfig):
    # GPU energy per job from DCGM, and estimated energy, facility energy and carbon per run
    # (DESIGN section 9), joined to the attribution ledger at read time.
    name = "finops.energy"
    label = "energy"
    default_auto_field = "django.db.models.BigAutoField"
