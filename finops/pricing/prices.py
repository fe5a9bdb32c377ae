"""Reads: the prices of an instance type, refreshed ones first, the shipped snapshot behind.

A figure (on demand, spot, each reserved term) comes from the newest `refresh_prices` read of
the provider's catalogue when there is one (InstancePrice), else from the dated snapshot
(data/gpu_prices_snapshot.json); each figure carries the source it came from, so pages and the
API can show it beside the number. Region: the asked one, else the figure's only other region
(list prices vary little between regions next to the gap between on demand, spot and
commitments); the quote says which region it priced.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from finops.attribution.inputs.catalogue import normalise_instance_type
from finops.pricing import snapshot
from finops.pricing.models import InstancePrice

KINDS = tuple(InstancePrice.Kind.values)
# The bills' ProviderName -> the catalogue's provider key (snapshot and refreshed prices).
PROVIDER_KEYS = {
    "amazon web services": "aws",
    "amazon": "aws",
    "google cloud": "gcp",
    "google cloud platform": "gcp",
    "google": "gcp",
    "microsoft": "azure",
    "microsoft azure": "azure",
}
# Said beside every way of buying a type that has no figure (the comparison then prices it with
# the configured ratios): never a number we could not source.
NO_PUBLISHED_PRICE = "no published price in snapshot"
RESERVED_KINDS = tuple(kind for kind in KINDS if kind not in ("on_demand", "spot"))


@dataclass(frozen=True)
class PriceQuote:
    provider: str
    instance_type: str
    # Hourly price per kind (on_demand, spot, 1y_no_upfront, ...), only the known ones.
    hourly: dict[str, Decimal] = field(default_factory=dict)
    # kind -> where the figure came from, e.g. "snapshot tsaol/aws-gpu@2d0108c ..., 2025-11-30".
    sources: dict[str, str] = field(default_factory=dict)
    regions: dict[str, str] = field(default_factory=dict)
    currency: str = "USD"
    interruption_band: str | None = None
    # kind -> the date the figure holds from (the catalogue's effective date, the refresh's
    # fetch date, the snapshot source's date); None where the source states none.
    dates: dict[str, dt.date | None] = field(default_factory=dict)

    @property
    def on_demand(self) -> Decimal | None:
        return self.hourly.get("on_demand")

    def ratio(self, kind: str) -> Decimal | None:
        """The kind's price / the on-demand price, when both are known in one currency."""
        on_demand, price = self.on_demand, self.hourly.get(kind)
        return price / on_demand if on_demand and price is not None else None

    def body(self) -> dict[str, Any]:
        """As shown beside the comparison: every figure with its region and source."""
        return {
            "provider": self.provider,
            "instance_type": self.instance_type,
            "currency": self.currency,
            "interruption_band": self.interruption_band,
            "figures": [
                {
                    "kind": kind,
                    "hourly": str(self.hourly[kind]),
                    "region": self.regions[kind],
                    "source": self.sources[kind],
                    "date": _iso(self.dates.get(kind)),
                }
                for kind in KINDS
                if kind in self.hourly
            ],
        }


def _iso(day: dt.date | None) -> str | None:
    return day.isoformat() if day is not None else None


def _snapshot_date(entry: dict[str, Any]) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(entry.get("date")))
    except ValueError:
        return None


def provider_key(provider: str) -> str:
    """The catalogue's key of a provider as the bills name it ("Google Cloud" -> "gcp")."""
    name = provider.strip().lower()
    return PROVIDER_KEYS.get(name, name)


def _snapshot_label(entry: dict[str, Any]) -> str:
    source = entry.get("source") or {}
    where = f"{source.get('repository')}@{str(source.get('commit', ''))[:7]} {source.get('path')}"
    return f"snapshot: {where}, {entry.get('date') or 'undated (see the commit)'}"


def _refreshed(provider: str, instance_type: str, region: str) -> dict[str, InstancePrice]:
    rows = InstancePrice.objects.filter(
        provider=provider, instance_type=normalise_instance_type(instance_type)
    )
    chosen: dict[str, InstancePrice] = {}
    # The asked region first, then any other region (by name, so the answer is stable).
    for row in sorted(rows, key=lambda r: (r.region.lower() != region.lower(), r.region)):
        chosen.setdefault(row.kind, row)
    return chosen


def quote(provider: str, instance_type: str, region: str) -> PriceQuote | None:
    """Every known figure of the type; None when neither a refresh nor the snapshot has one."""
    provider = provider_key(provider)
    if not instance_type:
        return None
    hourly: dict[str, Decimal] = {}
    sources: dict[str, str] = {}
    regions: dict[str, str] = {}
    dates: dict[str, dt.date | None] = {}
    currency = "USD"
    for kind, row in _refreshed(provider, instance_type, region).items():
        hourly[kind], regions[kind], currency = row.hourly, row.region, row.currency
        sources[kind] = f"{row.source}, fetched {row.fetched_at:%Y-%m-%d}"
        dates[kind] = row.effective_date or row.fetched_at.date()
    entry = snapshot.price_entry(provider, instance_type, region)
    band = None
    if entry is not None:
        band = entry.get("interruption_band")
        if entry.get("currency", "USD") == currency:
            figures = {"on_demand": entry.get("on_demand_hourly"), "spot": entry.get("spot_hourly")}
            figures.update(entry.get("reserved") or {})
            for kind, value in figures.items():
                if kind in KINDS and kind not in hourly and value not in (None, ""):
                    hourly[kind], regions[kind] = Decimal(str(value)), entry["region"]
                    sources[kind] = _snapshot_label(entry)
                    dates[kind] = _snapshot_date(entry)
    if not hourly:
        return None
    return PriceQuote(provider, instance_type, hourly, sources, regions, currency, band, dates)


def on_demand_hour_price(provider: str, instance_type: str, region: str) -> Decimal | None:
    """A ListPriceSource for attribution: the on-demand price of one instance-hour."""
    found = quote(provider, instance_type, region)
    return None if found is None else found.on_demand


def price_body(provider: str, instance_type: str, region: str) -> dict[str, Any] | None:
    """The type's figures with their sources (PriceQuote.body), and the kinds it has no figure
    for (neither refreshed nor in the snapshot) with why: the snapshot entry's note, or that
    the snapshot does not list the type. None for an unknown instance type."""
    if not instance_type:
        return None
    found = quote(provider, instance_type, region)
    body = (
        found.body()
        if found is not None
        else {
            "provider": provider_key(provider),
            "instance_type": instance_type,
            "currency": None,
            "interruption_band": None,
            "figures": [],
        }
    )
    known = {figure["kind"] for figure in body["figures"]}
    missing = [kind for kind in KINDS if kind not in known]
    body["missing"] = missing
    body["missing_note"] = None
    if missing:
        entry = snapshot.price_entry(provider_key(provider), instance_type, region)
        why = (entry or {}).get("note") or (
            "the snapshot does not list this type" if entry is None else ""
        )
        body["missing_note"] = f"{NO_PUBLISHED_PRICE}: {why}" if why else NO_PUBLISHED_PRICE
    return body
