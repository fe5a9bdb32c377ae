"""The shipped, dated price snapshot (data/gpu_prices_snapshot.json) and lookups into it.

Each entry prices one instance type in one region; null prices are unknown offline (the
comparison then falls back to the bills' ListCost and the configured ratios). The snapshot is
also a ListPriceSource for attribution: a usage line without ListCost gets its on-demand
equivalent from here (flagged `catalogue`).
"""

from __future__ import annotations

import functools
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from finops.attribution.catalogue import normalise_instance_type

SNAPSHOT_PATH = Path(__file__).resolve().parent / "data" / "gpu_prices_snapshot.json"


@functools.cache
def snapshot(path: Path = SNAPSHOT_PATH) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _entries(provider: str, instance_type: str) -> list[dict[str, Any]]:
    wanted = normalise_instance_type(instance_type)
    return [
        entry
        for entry in snapshot()["prices"]
        if entry["provider"] == provider.lower()
        and normalise_instance_type(entry["instance_type"]) == wanted
    ]


def price_entry(provider: str, instance_type: str, region: str) -> dict[str, Any] | None:
    """The entry of the type in the region, else in any region (prices vary little between
    regions next to the gap between on demand, spot and commitments)."""
    entries = _entries(provider, instance_type)
    for entry in entries:
        if entry["region"].lower() == region.lower():
            return entry
    return entries[0] if entries else None


def _decimal(value: Any) -> Decimal | None:
    return None if value in (None, "") else Decimal(str(value))


def on_demand_hour_price(provider: str, instance_type: str, region: str) -> Decimal | None:
    entry = price_entry(provider, instance_type, region)
    return None if entry is None else _decimal(entry.get("on_demand_hourly"))


def spot_ratio(provider: str, instance_type: str, region: str) -> Decimal | None:
    """Spot / on-demand price of the type, when the snapshot has both."""
    entry = price_entry(provider, instance_type, region)
    if entry is None:
        return None
    on_demand, spot = _decimal(entry.get("on_demand_hourly")), _decimal(entry.get("spot_hourly"))
    return spot / on_demand if on_demand and spot is not None else None


def reserved_ratios(provider: str, instance_type: str, region: str) -> dict[str, Decimal]:
    """Term key (1y_no_upfront, ...) -> committed hourly / on-demand hourly, where known."""
    entry = price_entry(provider, instance_type, region)
    if entry is None:
        return {}
    on_demand = _decimal(entry.get("on_demand_hourly"))
    if not on_demand:
        return {}
    ratios = {}
    for key, value in (entry.get("reserved") or {}).items():
        price = _decimal(value)
        if price is not None:
            ratios[key] = price / on_demand
    return ratios
