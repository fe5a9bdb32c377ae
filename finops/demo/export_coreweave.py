"""The CoreWeave bill as CoreWeave's FOCUS usage export: quantities, no cost.

CoreWeave's FOCUS export API returns usage only (../shared/samples/README.md), so the usage rows
here leave every cost and price column empty, and the demo writes the contract rate card
(`contract_rates`) that `ingest_billing --format coreweave` prices them with: one rate per
instance type or storage SKU, valid for the demo month. The month's tax and SLA credit come from
the invoice, not the usage API; they are kept as priced rows (the parser keeps a row's cost when
the row has one), so the import total is the invoice total.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from finops.demo.focus_catalogue import Row

_COST_COLUMNS = (
    "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ListUnitPrice",
    "ContractedUnitPrice", "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
    "PricingCurrencyListUnitPrice",
)  # fmt: skip
# Storage SKUs as CoreWeave names them (the rate card is keyed by them).
STORAGE_SKUS = {
    "Distributed File Storage": "storage.dfs.hdd-nvme",
    "AI Object Storage": "storage.object.ai",
}


@dataclass(frozen=True)
class ContractRate:
    instance_type: str  # instance type or storage SKU, as the usage row names it
    pricing_category: str
    rate: Decimal
    unit: str


def usage_rows(*, focus_rows: list[Row]) -> list[Row]:
    """The export's rows: usage without costs, plus the invoice's priced tax and credit."""
    rows: list[Row] = []
    for focus in focus_rows:
        row = dict(focus)
        if focus["ChargeCategory"] == "Usage":
            for column in _COST_COLUMNS:
                row[column] = ""
            if focus["x_InstanceType"]:
                row["SkuId"] = focus["x_InstanceType"]
                row["SkuPriceId"] = ""
                row["ChargeDescription"] = f"{focus['x_InstanceType']} node hour"
            else:
                row["SkuId"] = STORAGE_SKUS[focus["ServiceName"]]
                row["SkuPriceId"] = ""
                row["ChargeDescription"] = f"{focus['ServiceName']} ({focus['ConsumedUnit']})"
        rows.append(row)
    return rows


def contract_rates(*, focus_rows: list[Row]) -> list[ContractRate]:
    """The contract prices the FOCUS rows were billed at, as a rate card."""
    rates: dict[tuple[str, str], ContractRate] = {}
    for focus in focus_rows:
        if focus["ChargeCategory"] != "Usage":
            continue
        if focus["x_InstanceType"]:
            key = (focus["x_InstanceType"], focus["PricingCategory"])
            price, unit = Decimal(focus["ContractedUnitPrice"]), focus["ConsumedUnit"]
        else:
            key = (STORAGE_SKUS[focus["ServiceName"]], focus["PricingCategory"])
            price, unit = Decimal(focus["ListUnitPrice"]), focus["ConsumedUnit"]
        found = rates.setdefault(key, ContractRate(key[0], key[1], price, unit))
        assert found.rate == price, key
    return sorted(rates.values(), key=lambda r: (r.instance_type, r.pricing_category))
