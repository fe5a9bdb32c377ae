"""The on-demand equivalent (ListCost) and the pricing mix of a line item (issue 13).

Attribution splits three columns per line item: EffectiveCost (what was paid, amortised), the
on-demand equivalent and ContractedCost. This module decides, per line, the on-demand
equivalent it carries and where it came from, and how the line was bought:

- `bill`: the provider's ListCost.
- `catalogue`: no ListCost on a usage line; the on-demand catalogue price of its instance type
  x its hours (a registered ListPriceSource, see finops.pricing), rounded to the stored money
  places. Shown as an estimate.
- `unpriced`: a usage line with no ListCost (or a ListCost of 0 on a line that cost something:
  exports leave it 0 when they do not know it) and no catalogue price. It carries its
  EffectiveCost, so the columns still add up to the bill and it claims no savings, but its
  on-demand figure is unknown: the pricing comparison says so rather than compute from it.
- `actual`: not usage (tax, credit, adjustment) and no ListCost: the line's EffectiveCost, so
  it claims no savings.
- `purchase`: a commitment purchase carries 0. Its cost reaches usage through amortisation
  (EffectiveCost), and its on-demand equivalent is the ListCost of the usage it covers;
  counting the purchase too would price the same hours twice.

Attribution stays independent of finops.pricing (imports flow one way): pricing registers a
price source here when its app is ready.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from finops.core.money import MONEY_QUANTUM

BILL = "bill"
CATALOGUE = "catalogue"
ACTUAL = "actual"
UNPRICED = "unpriced"
PURCHASE = "purchase"
ESTIMATED_SOURCES = frozenset({CATALOGUE, ACTUAL, UNPRICED})

# The pricing mix (issue 13): how a line's actual cost was bought.
ON_DEMAND = "on_demand"
SPOT = "spot"
COMMITMENT = "commitment"
OTHER = "other"
MIX_KINDS = (ON_DEMAND, SPOT, COMMITMENT, OTHER)

# Usage types / SKUs that name spot capacity where PricingCategory does not say Dynamic
# (AWS `SpotUsage:p5.48xlarge`, GCP `Preemptible`, Azure `Spot` / `Low Priority` meters).
_SPOT_WORDS = ("spot", "preemptible", "low priority", "lowpriority")
_HOUR_UNITS = frozenset({"h", "hr", "hrs", "hour", "hours", "instance-hours", "instance hours"})
_SECONDS_PER_HOUR = Decimal(3600)

# (provider, instance type, region) -> on-demand price of one instance-hour, or None.
ListPriceSource = Callable[[str, str, str], Decimal | None]
_sources: list[ListPriceSource] = []


def register_list_price_source(source: ListPriceSource) -> None:
    """Add a catalogue of on-demand prices (finops.pricing registers its snapshot)."""
    if source not in _sources:
        _sources.append(source)


def catalogue_hour_price(provider: str, instance_type: str, region: str) -> Decimal | None:
    for source in _sources:
        price = source(provider, instance_type, region)
        if price is not None:
            return price
    return None


def pricing_mix(*, pricing_category: str, sku_id: str, commitment_discount_id: str) -> str:
    """on_demand (Standard), spot (Dynamic or a spot usage type), commitment (Committed, or
    a row a commitment discount applies to), other."""
    category = pricing_category.strip().lower()
    if category == "committed" or commitment_discount_id:
        return COMMITMENT
    sku = sku_id.lower()
    if category == "dynamic" or any(word in sku for word in _SPOT_WORDS):
        return SPOT
    if category == "standard":
        return ON_DEMAND
    return OTHER


@dataclass(frozen=True, slots=True)
class ListLine:
    """The columns of a line item that decide its on-demand equivalent."""

    charge_category: str
    list_cost: Decimal | None
    effective_cost: Decimal
    provider: str
    instance_type: str
    region: str
    consumed_quantity: Decimal | None
    consumed_unit: str
    period_seconds: int


class ListCostResolver:
    """The on-demand equivalent of each line, catalogue lookups memoised per instance type."""

    def __init__(self) -> None:
        self._prices: dict[tuple[str, str, str], Decimal | None] = {}

    def __call__(self, line: ListLine) -> tuple[Decimal, str]:
        charge = line.charge_category.strip().lower()
        if charge == "purchase":
            return Decimal(0), PURCHASE
        usage = charge == "usage"
        unlisted = line.list_cost is None or (
            usage and line.list_cost == 0 and line.effective_cost > 0
        )
        if line.list_cost is not None and not unlisted:
            return line.list_cost, BILL
        if usage and line.instance_type:
            price = self._price(line.provider, line.instance_type, line.region)
            hours = _hours(line)
            if price is not None and hours is not None:
                estimate = (price * hours).quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN)
                return estimate, CATALOGUE
        return line.effective_cost, UNPRICED if usage else ACTUAL

    def _price(self, provider: str, instance_type: str, region: str) -> Decimal | None:
        key = (provider.lower(), instance_type, region)
        if key not in self._prices:
            self._prices[key] = catalogue_hour_price(*key)
        return self._prices[key]


def _hours(line: ListLine) -> Decimal | None:
    """Instance-hours of the line: its consumed quantity when counted in hours, else the
    length of its charge period (one instance for the period)."""
    unit = line.consumed_unit.strip().lower()
    if line.consumed_quantity is not None and unit in _HOUR_UNITS:
        return line.consumed_quantity
    if line.period_seconds > 0:
        return Decimal(line.period_seconds) / _SECONDS_PER_HOUR
    return None
