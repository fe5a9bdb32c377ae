"""AWS CUR columns in both spellings (CUR 2.0 / Athena snake case, legacy CSV camel case), the
line item types' FOCUS categories, and the small name helpers the row and table builders share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from finops.core.money import MONEY_QUANTUM

ZERO = Decimal(0).quantize(MONEY_QUANTUM)

LEGACY = "legacy"
CUR2 = "cur2"


@dataclass(frozen=True)
class Column:
    snake: str  # CUR 2.0 / Athena spelling
    legacy: str  # legacy CUR CSV spelling

    def name(self, flavour: str) -> str:
        return self.legacy if flavour == LEGACY else self.snake


def _col(snake: str, legacy: str) -> Column:
    return Column(snake, legacy)


COLUMNS: dict[str, Column] = {
    "line_item_type": _col("line_item_line_item_type", "lineItem/LineItemType"),
    "usage_start": _col("line_item_usage_start_date", "lineItem/UsageStartDate"),
    "usage_end": _col("line_item_usage_end_date", "lineItem/UsageEndDate"),
    "unblended_cost": _col("line_item_unblended_cost", "lineItem/UnblendedCost"),
    "billing_period_start": _col("bill_billing_period_start_date", "bill/BillingPeriodStartDate"),
    "billing_period_end": _col("bill_billing_period_end_date", "bill/BillingPeriodEndDate"),
    "payer_account": _col("bill_payer_account_id", "bill/PayerAccountId"),
    "usage_account": _col("line_item_usage_account_id", "lineItem/UsageAccountId"),
    # Account names: CUR 2.0 has them; legacy CUR has no such columns (kept "" then).
    "payer_account_name": _col("bill_payer_account_name", "bill/PayerAccountName"),
    "usage_account_name": _col("line_item_usage_account_name", "lineItem/UsageAccountName"),
    "usage_type": _col("line_item_usage_type", "lineItem/UsageType"),
    "product_code": _col("line_item_product_code", "lineItem/ProductCode"),
    "resource_id": _col("line_item_resource_id", "lineItem/ResourceId"),
    "currency": _col("line_item_currency_code", "lineItem/CurrencyCode"),
    "usage_amount": _col("line_item_usage_amount", "lineItem/UsageAmount"),
    "pricing_unit": _col("pricing_unit", "pricing/unit"),
    "public_on_demand_cost": _col("pricing_public_on_demand_cost", "pricing/publicOnDemandCost"),
    "product_name": _col("product_product_name", "product/ProductName"),
    "sku": _col("product_sku", "product/sku"),
    "region_code": _col("product_region_code", "product/regionCode"),
    "region": _col("product_region", "product/region"),
    "instance_type": _col("product_instance_type", "product/instanceType"),
    "reservation_arn": _col("reservation_reservation_a_r_n", "reservation/ReservationARN"),
    "reservation_effective_cost": _col("reservation_effective_cost", "reservation/EffectiveCost"),
    "reservation_unused_upfront": _col(
        "reservation_unused_amortized_upfront_fee_for_billing_period",
        "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod",
    ),
    "reservation_unused_recurring": _col(
        "reservation_unused_recurring_fee", "reservation/UnusedRecurringFee"
    ),
    "savings_plan_arn": _col("savings_plan_savings_plan_a_r_n", "savingsPlan/SavingsPlanARN"),
    "savings_plan_effective_cost": _col(
        "savings_plan_savings_plan_effective_cost", "savingsPlan/SavingsPlanEffectiveCost"
    ),
    "savings_plan_total_commitment": _col(
        "savings_plan_total_commitment_to_date", "savingsPlan/TotalCommitmentToDate"
    ),
    "savings_plan_used_commitment": _col(
        "savings_plan_used_commitment", "savingsPlan/UsedCommitment"
    ),
}
REQUIRED = ("line_item_type", "usage_start", "usage_end", "unblended_cost", "billing_period_start")

# CUR 2.0 nests most product attributes in the `product` map (product['product_name']); the key
# there is the flat column's name without its "product_" prefix.
PRODUCT_MAP_FALLBACK = ("product_name", "sku", "region_code", "region", "instance_type")

_CHARGE_CATEGORY = {
    "Usage": "Usage",
    "DiscountedUsage": "Usage",
    "SavingsPlanCoveredUsage": "Usage",
    "SavingsPlanNegation": "Usage",
    "Tax": "Tax",
    "Credit": "Credit",
    "Refund": "Credit",
    "Discount": "Credit",
    "BundledDiscount": "Credit",
    "RIFee": "Purchase",
    "SavingsPlanRecurringFee": "Purchase",
    "SavingsPlanUpfrontFee": "Purchase",
    "Fee": "Purchase",
}
_COMMITTED = {
    "DiscountedUsage",
    "SavingsPlanCoveredUsage",
    "SavingsPlanNegation",
    "RIFee",
    "SavingsPlanRecurringFee",
}
COMMITMENT_USED = {"DiscountedUsage", "SavingsPlanCoveredUsage", "SavingsPlanNegation"}
COMMITMENT_UNUSED = {"RIFee", "SavingsPlanRecurringFee"}
# Rows that consume something; a negation only cancels cost, counting its quantity would double.
CONSUMING = {"Usage", "DiscountedUsage", "SavingsPlanCoveredUsage"}

_SQUASH_RE = re.compile(r"[^a-z0-9]")


def squash(name: str) -> str:
    return _SQUASH_RE.sub("", name.lower())


def charge_category(line_item_type: str) -> str:
    found = _CHARGE_CATEGORY.get(line_item_type)
    if found is not None:
        return found
    # EdpDiscount, PrivateRateDiscount, SppDiscount, DistributorDiscount, ...
    if line_item_type.endswith("Discount"):
        return "Credit"
    # A type AWS adds later: kept (BilledCost = EffectiveCost), flagged for review.
    return "Adjustment"


def pricing_category(line_item_type: str, category: str, usage_type: str) -> str:
    if category not in ("Usage", "Purchase"):
        return ""
    if line_item_type in _COMMITTED:
        return "Committed"
    if category == "Usage" and "SpotUsage" in usage_type:
        return "Dynamic"
    return "Standard"


def strip_user_prefix(key: str) -> str:
    for prefix in ("user:", "user_"):
        if key.startswith(prefix) and len(key) > len(prefix):
            return key[len(prefix) :]
    return key


LIMITED_FIELDS = (
    "billing_account_id",
    "sub_account_id",
    "billing_account_name",
    "sub_account_name",
    "service_name",
    "sku_id",
    "region_id",
    "resource_id",
    "resource_name",
    "commitment_discount_id",
    "consumed_unit",
    "x_instance_type",
)
