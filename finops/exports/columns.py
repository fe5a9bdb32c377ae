"""The FOCUS 1.2 columns the export writes, with their Arrow types, and the CostLineItem fields
it reads.

Parquet keeps types: money as decimal128(38, 12) (exact, the ledger's own scale), quantities as
decimal128(38, 12), derived unit prices as decimal128(38, 18), timestamps as timestamp[us, UTC].
CSV holds the same values as text (CSV_SCHEMA: every column a string; writer._csv_cell).
"""

from __future__ import annotations

import pyarrow as pa

from finops.core.money import MONEY_PLACES

FOCUS_VERSION = "1.2"

_MONEY = pa.decimal128(38, MONEY_PLACES)
_QUANTITY = pa.decimal128(38, 12)
# Unit prices are derived (cost / PricingQuantity) and FOCUS requires unit price x quantity to
# equal the cost. 18 places keep that product exact to 1e-9 (the validator's relative tolerance)
# even for per-request prices; DuckDB can still multiply decimal(38, 18) by decimal(38, 12) for
# any row cost below 10^8.
UNIT_PRICE_PLACES = 18
_UNIT_PRICE = pa.decimal128(38, UNIT_PRICE_PLACES)
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_STRING = pa.string()

FOCUS_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("AvailabilityZone", _STRING),
    ("BilledCost", _MONEY),
    ("BillingAccountId", _STRING),
    ("BillingAccountName", _STRING),
    ("BillingAccountType", _STRING),
    ("BillingCurrency", _STRING),
    ("BillingPeriodEnd", _TIMESTAMP),
    ("BillingPeriodStart", _TIMESTAMP),
    ("CapacityReservationId", _STRING),
    ("CapacityReservationStatus", _STRING),
    ("ChargeCategory", _STRING),
    ("ChargeClass", _STRING),
    ("ChargeDescription", _STRING),
    ("ChargeFrequency", _STRING),
    ("ChargePeriodEnd", _TIMESTAMP),
    ("ChargePeriodStart", _TIMESTAMP),
    ("CommitmentDiscountCategory", _STRING),
    ("CommitmentDiscountId", _STRING),
    ("CommitmentDiscountName", _STRING),
    ("CommitmentDiscountQuantity", _QUANTITY),
    ("CommitmentDiscountStatus", _STRING),
    ("CommitmentDiscountType", _STRING),
    ("CommitmentDiscountUnit", _STRING),
    ("ConsumedQuantity", _QUANTITY),
    ("ConsumedUnit", _STRING),
    ("ContractedCost", _MONEY),
    ("ContractedUnitPrice", _UNIT_PRICE),
    ("EffectiveCost", _MONEY),
    ("InvoiceId", _STRING),
    ("InvoiceIssuerName", _STRING),
    ("ListCost", _MONEY),
    ("ListUnitPrice", _UNIT_PRICE),
    ("PricingCategory", _STRING),
    ("PricingCurrency", _STRING),
    ("PricingCurrencyContractedUnitPrice", _UNIT_PRICE),
    ("PricingCurrencyEffectiveCost", _MONEY),
    ("PricingCurrencyListUnitPrice", _UNIT_PRICE),
    ("PricingQuantity", _QUANTITY),
    ("PricingUnit", _STRING),
    ("ProviderName", _STRING),
    ("PublisherName", _STRING),
    ("RegionId", _STRING),
    ("RegionName", _STRING),
    ("ResourceId", _STRING),
    ("ResourceName", _STRING),
    ("ResourceType", _STRING),
    ("ServiceCategory", _STRING),
    ("ServiceName", _STRING),
    ("ServiceSubcategory", _STRING),
    ("SkuId", _STRING),
    ("SkuMeter", _STRING),
    ("SkuPriceDetails", _STRING),
    ("SkuPriceId", _STRING),
    ("SubAccountId", _STRING),
    ("SubAccountName", _STRING),
    ("SubAccountType", _STRING),
    ("Tags", _STRING),
)
# FOCUS asks for custom columns after all FOCUS columns, x_-prefixed.
CUSTOM_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("x_InstanceType", _STRING),
    ("x_GpuCount", pa.int32()),
    ("x_GpuModel", _STRING),
    # The credits already in the row's BilledCost and EffectiveCost (GCP's credits array), as a
    # JSON list of {type, name, amount, id, ...}; null when none.
    ("x_Credits", _STRING),
    # Energy of the jobs that ran on the row's GPU node in its charge period (docs/focus-export.md,
    # finops.energy.line_energy): GPU kWh, facility kWh (x PUE), kg CO2e (location-based), and
    # whether it was measured (DCGM), estimated (GPU model power) or mixed; null elsewhere.
    ("x_GpuEnergyKWh", _QUANTITY),
    ("x_EnergyKWh", _QUANTITY),
    ("x_CarbonKgCO2e", _QUANTITY),
    ("x_EnergyMethod", _STRING),
)
COLUMNS = FOCUS_COLUMNS + CUSTOM_COLUMNS
PARQUET_SCHEMA = pa.schema(
    [pa.field(name, kind) for name, kind in COLUMNS],
    metadata={"FocusVersion": FOCUS_VERSION},
)
CSV_SCHEMA = pa.schema([pa.field(name, _STRING) for name, _ in COLUMNS])

# CostLineItem fields the export reads (everything but the batch link).
LINE_ITEM_FIELDS = (
    "source",
    "billing_period",
    "billing_period_start",
    "billing_period_end",
    "provider_name",
    "billing_account_id",
    "sub_account_id",
    "billing_account_name",
    "sub_account_name",
    "charge_period_start",
    "charge_period_end",
    "charge_category",
    "pricing_category",
    "service_category",
    "service_name",
    "sku_id",
    "region_id",
    "resource_id",
    "resource_name",
    "resource_type",
    "commitment_discount_id",
    "commitment_discount_status",
    "commitment_discount_type",
    "consumed_quantity",
    "consumed_unit",
    "list_cost",
    "contracted_cost",
    "billed_cost",
    "effective_cost",
    "billing_currency",
    "tags",
    "x_credits",
    "x_instance_type",
    "x_gpu_count",
    "x_gpu_model",
)
