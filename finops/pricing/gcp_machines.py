"""GCP machine prices composed from Cloud Catalog SKUs (refresh_prices --provider gcp). Pure.

GCP bills an accelerator VM as separate SKUs: each attached GPU per GPU-hour, the machine
family's vCPUs per vCPU-hour and its memory per GiB-hour. The hourly price of a machine is
therefore GPU SKU x GPUs + vCPU SKU x vCPUs + RAM SKU x GiB. It is composed here, for each way
of buying it (on demand, spot, 1 and 3 year committed use), from one read of the catalogue, so
the comparison code keeps reading one price per instance-hour (InstancePrice) whatever the
provider. A way of buying with a component missing gets no figure: never a partial price.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from finops.pricing.catalogues import Figure
from finops.pricing.gcp_catalog import PROVIDER, UNDATED, PriceTier

SOURCE = "GCP Cloud Catalog"
# Cloud Catalog usage type -> the price kinds it gives. A resource-based committed use discount
# is billed monthly over its term, with no upfront option: its one price stands for both
# payment options (as an Azure reservation's does), rather than leaving "all upfront" to a
# placeholder ratio.
KINDS_OF_USAGE: Mapping[str, tuple[str, ...]] = {
    "OnDemand": ("on_demand",),
    "Preemptible": ("spot",),
    "Commit1Yr": ("1y_no_upfront", "1y_all_upfront"),
    "Commit3Yr": ("3y_no_upfront", "3y_all_upfront"),
}
# SKUs of the same family and resource that are not the plain machine's price: sole-tenant
# nodes, custom and extended memory, and the Dynamic Workload Scheduler / calendar modes.
_NOT_PLAIN = re.compile(r"sole tenan|custom|extended|\bDWS\b|calendar|flex", re.IGNORECASE)


@dataclass(frozen=True)
class MachineShape:
    """What one machine type is billed for, per hour (GCP's machine type documentation)."""

    instance_type: str
    # The word naming the family in its vCPU and RAM SKUs: "A2 Instance Core running in ...".
    family: str
    # As gcp_catalog.gpu_model_of reads the GPU SKU: A100, A100-80GB, H100-80GB, L4.
    gpu_model: str
    gpus: int
    vcpus: int
    memory_gib: Decimal


@dataclass(frozen=True)
class Composition:
    figures: list[Figure]
    # usage type -> the components no SKU was found for, e.g. {"Commit1Yr": ["GPU L4"]}.
    missing: dict[str, list[str]]


def shape_of(entry: Mapping[str, Any]) -> MachineShape | None:
    """The shape recorded beside a snapshot entry ("machine"), if any."""
    machine = entry.get("machine")
    if not machine:
        return None
    return MachineShape(
        instance_type=str(entry["instance_type"]),
        family=str(machine["family"]),
        gpu_model=str(machine["gpu_model"]),
        gpus=int(entry["gpus"]),
        vcpus=int(machine["vcpus"]),
        memory_gib=Decimal(str(machine["memory_gib"])),
    )


def _pick(
    tiers: Iterable[PriceTier], *, region: str, wanted: Callable[[PriceTier], bool]
) -> PriceTier | None:
    """The first-tier price of the matching SKU that serves the region: a regional SKU before a
    multi-regional one, then the newest effective time (then the SKU id, for a stable answer)."""
    candidates = [
        tier
        for tier in tiers
        if tier.tier_start == 0 and region in tier.regions and wanted(tier)
        if not _NOT_PLAIN.search(tier.description)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda t: (len(t.regions), -t.effective_time.timestamp(), t.sku_id))


def _components(
    tiers: list[PriceTier], shape: MachineShape, region: str
) -> dict[str, PriceTier | None]:
    family = re.compile(rf"\b{re.escape(shape.family)}\b", re.IGNORECASE)
    return {
        f"GPU {shape.gpu_model}": _pick(
            tiers,
            region=region,
            wanted=lambda t: (
                t.resource_group == "GPU"
                and t.usage_unit == "h"
                and t.gpu_model == shape.gpu_model.upper()
            ),
        ),
        f"vCPU {shape.family}": _pick(
            tiers,
            region=region,
            wanted=lambda t: (
                t.resource_group == "CPU"
                and t.usage_unit == "h"
                and family.search(t.description) is not None
            ),
        ),
        f"RAM {shape.family}": _pick(
            tiers,
            region=region,
            wanted=lambda t: (
                t.resource_group == "RAM"
                and t.usage_unit == "GiBy.h"
                and family.search(t.description) is not None
            ),
        ),
    }


def compose(*, tiers: Iterable[PriceTier], shape: MachineShape, region: str) -> Composition:
    """The machine's hourly price for each way of buying it that has all three components."""
    figures: list[Figure] = []
    missing: dict[str, list[str]] = {}
    all_tiers = list(tiers)
    for usage_type, kinds in KINDS_OF_USAGE.items():
        of_usage = [t for t in all_tiers if t.usage_type == usage_type]
        parts = _components(of_usage, shape, region)
        absent = [name for name, tier in parts.items() if tier is None]
        gpu, core, ram = parts.values()
        if absent or gpu is None or core is None or ram is None:
            missing[usage_type] = absent
            continue
        if len({gpu.currency, core.currency, ram.currency}) != 1:
            missing[usage_type] = ["one currency for GPU, vCPU and RAM"]
            continue
        hourly = (
            gpu.unit_price * shape.gpus
            + core.unit_price * shape.vcpus
            + ram.unit_price * shape.memory_gib
        )
        source = (
            f"{SOURCE}: {shape.gpus} x GPU SKU {gpu.sku_id} + {shape.vcpus} x vCPU SKU "
            f"{core.sku_id} + {shape.memory_gib} GiB x RAM SKU {ram.sku_id}"
        )
        dated = [t.effective_time for t in (gpu, core, ram) if t.effective_time != UNDATED]
        for kind in kinds:
            figures.append(
                Figure(
                    provider=PROVIDER,
                    instance_type=shape.instance_type,
                    region=region,
                    kind=kind,
                    hourly=hourly,
                    currency=gpu.currency,
                    source=source,
                    source_ref=f"{gpu.sku_id},{core.sku_id},{ram.sku_id}",
                    # The price holds from when its newest component took effect.
                    effective_date=max(dated).date() if dated else None,
                )
            )
    return Composition(figures=figures, missing=missing)
