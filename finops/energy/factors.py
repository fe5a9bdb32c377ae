"""What the run, team and line-item energy figures share: exact arithmetic and kWh rounding,
the power of a GPU model and a node's estimated energy, the PUE of a provider and region (the
pricing settings' on-prem PUE where none is published), and the chunks job ids are read in."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from finops.core.money import EXACT
from finops.energy.figures import GPU_POWER, Sourced, pue_for
from finops.run_metrics.peaks import gpu_family

CTX = EXACT
KWH_PLACES = Decimal("0.000001")
JOULES_PER_KWH = Decimal(3_600_000)
SECONDS_PER_HOUR = Decimal(3600)
CHUNK = 500


def round_kwh(value: Decimal) -> Decimal:
    """kWh (and kg CO2e) to 6 places, half-even."""
    return value.quantize(KWH_PLACES, context=CTX)


def gpu_power(model: str) -> tuple[Sourced, Sourced] | None:
    """The idle and maximum power of a GPU model; None when no figure is known."""
    family = gpu_family(model) or ("A10G" if "A10G" in model.upper() else None)
    for name in (family, model.upper().strip()):
        if name and name in GPU_POWER:
            power = GPU_POWER[name]
            return power.idle_w, power.max_w
    return None


def estimated_kwh(
    gpu_seconds: Decimal, utilisation: Decimal, power: tuple[Sourced, Sourced]
) -> Decimal:
    """GPU kWh of GPU-seconds at a utilisation: idle + utilisation x (max - idle) watts."""
    idle, peak = power
    watts = idle.value + utilisation * (peak.value - idle.value)
    return CTX.divide(gpu_seconds * watts, SECONDS_PER_HOUR * 1000)


def on_prem_pue() -> Sourced:
    """The pricing settings' on-prem PUE (for a node of no known provider)."""
    from finops.pricing.comparisons import assumptions_current

    value = assumptions_current().pue
    return Sourced(value, "pricing settings: on-prem PUE", "current", "this organisation's setting")


class Pue:
    """The PUE of a provider and region: the published one, else the on-prem setting (read once,
    when first needed)."""

    def __init__(self) -> None:
        self._on_prem: Sourced | None = None

    def of(self, provider: str, region: str) -> Sourced:
        found = pue_for(provider, region)
        if found is not None:
            return found
        if self._on_prem is None:
            self._on_prem = on_prem_pue()
        return self._on_prem


def chunks(values: Iterable[Any]) -> Iterable[list[Any]]:
    """The values sorted, in lists of CHUNK (what one `__in` query reads)."""
    items = sorted(values)
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]
