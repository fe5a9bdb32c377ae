"""The shipped, dated price snapshot (data/gpu_prices_snapshot.json) and lookups into it.

Each entry prices one instance type in one region and names its source, the source's licence
and date; null prices are unknown offline (the comparison then falls back to the bills'
ListCost and the configured ratios). finops.pricing.prices reads it behind refreshed prices.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from finops.attribution.inputs.catalogue import normalise_instance_type

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


def price_entry_any(instance_type: str) -> dict[str, Any] | None:
    """The first entry of the type, whatever its provider (for its GPU count)."""
    wanted = normalise_instance_type(instance_type)
    for entry in snapshot()["prices"]:
        if normalise_instance_type(entry["instance_type"]) == wanted:
            return dict(entry)
    return None
