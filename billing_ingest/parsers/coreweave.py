"""CoreWeave usage: its FOCUS export priced with our contract rate card.

CoreWeave's FOCUS export API returns usage quantities only, no cost (see ../shared/samples), so
cost is ours to compute: ConsumedQuantity x the CoreWeaveRate valid on the row's
ChargePeriodStart day (UTC) for its instance type and PricingCategory, quantized to MONEY_QUANTUM
half-even. That cost is the row's BilledCost, EffectiveCost and ContractedCost: CoreWeave bills
the contract rate as it is (no amortisation). ListCost stays empty: the export carries no list
price and the contract rate is not one, so attribution prices the on-demand equivalent from the
price catalogue (CoreWeave's published on-demand rate) where it has the type, and the FOCUS
export falls back to ContractedCost as for any row without one.

Columns are FOCUS names, read by the FOCUS row builder (so values, nulls, Tags and timestamps read
exactly as in a FOCUS file). CoreWeave specifics:
- The instance type (gd-8xh100ib-i128) is x_InstanceType, else SkuId.
- An empty PricingCategory is Standard (on-demand), and is stored as such.
- ProviderName defaults to "CoreWeave", ChargeCategory to "Usage"; a row naming another
  provider fails the import (another provider's FOCUS file belongs under --format focus).
- A row whose file does carry BilledCost and EffectiveCost keeps them, as in FOCUS; only rows
  with both empty (or both columns absent) are priced.
- With a BillingCurrency column the rate must be in that currency; without one the rate's
  currency is the row's.
- A row's ConsumedUnit must be the rate's unit ("Hours" and "Hour" are the same unit), because a
  rate per hour applied to seconds would be silently wrong.
A row without exactly one rate fails the import with file, row, column and the rate it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

from billing_ingest.models import CoreWeaveRate
from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.focus import FocusRowBuilder, read_focus_file
from billing_ingest.parsers.rows import LineItemRow
from billing_ingest.parsers.values import CHUNK_ROWS
from finops.core.errors import ImportFormatError
from finops.core.money import EXACT, MONEY_DIGITS, MONEY_PLACES, MONEY_QUANTUM

PROVIDER_NAME = "CoreWeave"
REQUIRED_COLUMNS = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd")
# Where the instance type is, in order of preference.
INSTANCE_TYPE_COLUMNS = ("x_InstanceType", "SkuId")
DEFAULT_PRICING_CATEGORY = CoreWeaveRate.PricingCategory.STANDARD.value

_MAX_MONEY = Decimal(10) ** (MONEY_DIGITS - MONEY_PLACES)


@dataclass(frozen=True)
class Rate:
    """One rate card entry, detached from the ORM so pricing a row needs no query."""

    instance_type: str
    pricing_category: str
    currency: str
    rate: Decimal
    unit: str
    valid_from: date
    valid_to: date | None  # inclusive; None: open-ended

    def covers(self, day: date) -> bool:
        return self.valid_from <= day and (self.valid_to is None or day <= self.valid_to)

    def describe(self) -> str:
        until = self.valid_to.isoformat() if self.valid_to else "open"
        return f"{self.rate:f} {self.currency}/{self.unit} ({self.valid_from.isoformat()}..{until})"


def same_unit(a: str, b: str) -> bool:
    """Units compared ignoring case and a plural s: "Hours" == "hour"."""
    return a.strip().lower().removesuffix("s") == b.strip().lower().removesuffix("s")


class RateCard:
    """The contract rates, loaded once per file: a rate card is small, a usage file is not."""

    def __init__(self, rates: Iterable[Rate]) -> None:
        self._by_key: dict[tuple[str, str], list[Rate]] = {}
        for rate in rates:
            self._by_key.setdefault((rate.instance_type, rate.pricing_category), []).append(rate)
        self._cache: dict[tuple[str, str, str | None, date], list[Rate]] = {}

    @classmethod
    def load(cls) -> RateCard:
        return cls(
            Rate(
                instance_type=row.instance_type,
                pricing_category=row.pricing_category,
                currency=row.currency,
                rate=row.rate,
                unit=row.unit,
                valid_from=row.valid_from,
                valid_to=row.valid_to,
            )
            for row in CoreWeaveRate.objects.all()
        )

    def matching(
        self, *, instance_type: str, pricing_category: str, currency: str | None, day: date
    ) -> list[Rate]:
        """Rates for the instance type and category valid on day (in currency, if given).

        More than one means the card overlaps; the caller refuses to guess between them."""
        key = (instance_type, pricing_category, currency, day)
        found = self._cache.get(key)
        if found is None:
            found = [
                rate
                for rate in self._by_key.get((instance_type, pricing_category), [])
                if rate.covers(day) and (currency is None or rate.currency == currency)
            ]
            self._cache[key] = found
        return found


def price(quantity: Decimal, rate: Decimal) -> Decimal:
    """quantity x rate, rounded once to MONEY_QUANTUM, half-even (the product of two 12-place
    decimals is exact in EXACT's digits)."""
    product = EXACT.multiply(quantity, rate)
    return product.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN, context=EXACT)


class CoreWeaveRowBuilder(FocusRowBuilder):
    """A FOCUS row whose cost, when the export leaves it out, comes from the rate card."""

    def __init__(self, header: Sequence[str], *, file_label: str, rate_card: RateCard) -> None:
        super().__init__(
            header,
            file_label=file_label,
            required_columns=REQUIRED_COLUMNS,
            provider=PROVIDER_NAME,
        )
        self.rate_card = rate_card
        found = [hit for hit in (self.find(name) for name in INSTANCE_TYPE_COLUMNS) if hit]
        if not found:
            raise ImportFormatError(
                "missing column x_InstanceType or SkuId: the instance type prices the usage",
                file=file_label,
                column=INSTANCE_TYPE_COLUMNS[0],
            )
        self.instance_columns = found
        self.has_currency = self.find("BillingCurrency") is not None

    def positions(self) -> set[int]:
        return super().positions() | {position for _, position in self.instance_columns}

    def build(self, cells: Sequence[object], row_number: int) -> LineItemRow:
        item = super().build(cells, row_number)
        item["provider_name"] = item["provider_name"] or PROVIDER_NAME
        item["charge_category"] = item["charge_category"] or "Usage"
        if not item["x_instance_type"]:
            # The FOCUS builder reads x_InstanceType; CoreWeave may put the type in SkuId only.
            item["x_instance_type"] = item["sku_id"]
        invoiced = item.get("billed_cost")
        effective = item.get("effective_cost")
        if invoiced is not None and effective is not None:
            return item  # the export priced it: FOCUS semantics
        if invoiced is not None or effective is not None:
            empty = "EffectiveCost" if effective is None else "BilledCost"
            raise self._error(
                "is empty while the other cost column is set; give both or neither",
                row_number,
                empty,
            )
        self._price(item, row_number, column=self._instance_column(cells))
        return item

    def _error(self, message: str, row: int, column: str) -> ImportFormatError:
        return ImportFormatError(message, file=self.file_label, row=row, column=column)

    def _instance_column(self, cells: Sequence[object]) -> str:
        """The column the instance type was read from, for error messages."""
        for name, position in self.instance_columns:
            value = cells[position]
            if value is not None and str(value).strip():
                return name
        return self.instance_columns[0][0]

    def _price(self, item: LineItemRow, row: int, *, column: str) -> None:
        instance_type: str = item["x_instance_type"]
        if not instance_type:
            raise self._error(
                "is empty: the instance type is needed to find the contract rate", row, column
            )
        quantity: Decimal | None = item["consumed_quantity"]
        if quantity is None:
            raise self._error(
                "is empty: CoreWeave cost is ConsumedQuantity x contract rate",
                row,
                "ConsumedQuantity",
            )
        category = item["pricing_category"] or DEFAULT_PRICING_CATEGORY
        start: datetime = item["charge_period_start"]
        day = start.date()
        currency = item["billing_currency"] if self.has_currency else None
        rates = self.rate_card.matching(
            instance_type=instance_type, pricing_category=category, currency=currency, day=day
        )
        wanted = (
            f"{instance_type!r}, pricing category {category!r}"
            + (f", currency {currency}" if currency else "")
            + f", valid on {day.isoformat()}"
        )
        if not rates:
            raise self._error(
                f"no CoreWeave contract rate for instance type {wanted}; add a CoreWeaveRate "
                "covering that day",
                row,
                column,
            )
        if len(rates) > 1:
            listed = "; ".join(rate.describe() for rate in rates)
            raise self._error(
                f"{len(rates)} CoreWeave contract rates overlap for instance type {wanted}: "
                f"{listed}",
                row,
                column,
            )
        rate = rates[0]
        unit: str = item["consumed_unit"]
        if unit and not same_unit(unit, rate.unit):
            raise self._error(
                f"unit {unit!r} differs from the contract rate's unit {rate.unit!r} "
                f"({rate.describe()})",
                row,
                "ConsumedUnit",
            )
        cost = price(quantity, rate.rate)
        if abs(cost) >= _MAX_MONEY:
            raise self._error(
                f"quantity x rate = {cost:f} is out of range", row, "ConsumedQuantity"
            )
        item.update(
            {
                "pricing_category": category,
                "billing_currency": rate.currency,
                "billed_cost": cost,
                "effective_cost": cost,
                "list_cost": None,
                "contracted_cost": cost,
            }
        )


@register_billing_parser("coreweave")
def parse_coreweave(path: Path, *, file_label: str, chunk_size: int = CHUNK_ROWS) -> LineItemChunks:
    """Chunks of CostLineItem field dicts from a CoreWeave FOCUS usage export (CSV, gzip CSV or
    Parquet), priced with the CoreWeaveRate rate card."""
    rate_card: RateCard | None = None

    def make_builder(header: Sequence[str]) -> FocusRowBuilder:
        nonlocal rate_card
        # Loaded when reading starts (inside the import's transaction), not at registration.
        rate_card = rate_card or RateCard.load()
        return CoreWeaveRowBuilder(header, file_label=file_label, rate_card=rate_card)

    return read_focus_file(
        path, file_label=file_label, chunk_size=chunk_size, make_builder=make_builder
    )
