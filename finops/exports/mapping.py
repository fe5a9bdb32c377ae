"""One CostLineItem (as a dict of its fields) -> one FOCUS 1.2 row: focus_row. Pure: no database.

The ledger keeps the FOCUS columns that matter (DESIGN.md section 4). Every other FOCUS 1.2
column is written too, derived where FOCUS says how and null where FOCUS allows null; see
focus_row() and the helpers it calls for each decision and the reason for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from finops.core.money import EXACT
from finops.core.months import month_next
from finops.exports.columns import UNIT_PRICE_PLACES
from finops.exports.units import UNNAMED_UNIT, focus_unit

USAGE, PURCHASE, TAX, CREDIT, ADJUSTMENT = "Usage", "Purchase", "Tax", "Credit", "Adjustment"
_CHARGE_CATEGORIES = {name.lower(): name for name in (USAGE, PURCHASE, TAX, CREDIT, ADJUSTMENT)}
_PRICED = (USAGE, PURCHASE)  # FOCUS requires SKU, pricing quantity and unit prices on these

_PRICING_CATEGORIES = {
    "standard": "Standard",
    "committed": "Committed",
    "dynamic": "Dynamic",
    "other": "Other",
    # Spellings seen in provider exports for the same things.
    "on demand": "Standard",
    "on-demand": "Standard",
    "ondemand": "Standard",
    "spot": "Dynamic",
    "reserved": "Committed",
}

SERVICE_CATEGORIES = (
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
)
_SERVICE_CATEGORY_BY_LOWER = {name.lower(): name for name in SERVICE_CATEGORIES}
# Only for services whose rows never carry a ServiceCategory: first keyword found wins.
_SERVICE_KEYWORDS = (
    (("compute", "ec2", "virtual machine", "kubernetes", "gpu", "instance"), "Compute"),
    (("storage", "s3", "disk", "bucket", "blob"), "Storage"),
    (("network", "bandwidth", "data transfer", "vpc", "cdn", "load balanc"), "Networking"),
)

_SUB_ACCOUNT_TYPES = {
    "aws": "Linked Account",
    "azure": "Subscription",
    "microsoft": "Subscription",
    "gcp": "Project",
    "google cloud": "Project",
    "oracle": "Compartment",
    "oci": "Compartment",
    "coreweave": "Namespace",
}

LUMP_SUM_UNIT = UNNAMED_UNIT

_ARN_RE = re.compile(r"^arn:[^:]*:(?P<service>[^:]*):[^:]*:[^:]*:(?P<resource>.+)$")
_AZURE_TYPE_RE = re.compile(r"/providers/(?P<namespace>[^/]+)/(?P<type>[^/]+)/", re.I)

_UNIT_PRICE_QUANTUM = Decimal(1).scaleb(-UNIT_PRICE_PLACES)
_QUANTITY_QUANTUM = Decimal(1).scaleb(-12)
_ZERO = Decimal(0)
_ONE = Decimal(1)


def _text(value: str | None) -> str | None:
    """FOCUS null for a blank stored string (the ledger stores "unknown" as "")."""
    if value is None or not value.strip():
        return None
    return value


def _midnight_utc(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _divide(cost: Decimal, quantity: Decimal) -> Decimal:
    return EXACT.divide(cost, quantity).quantize(_UNIT_PRICE_QUANTUM, context=EXACT)


# --------------------------------------------------------------------------- column derivations


def _charge_category(stored: str) -> str:
    # The parsers always set it; a blank can only come from a FOCUS file that left the
    # (mandatory) column empty, and such rows are overwhelmingly usage.
    if not stored.strip():
        return USAGE
    return _CHARGE_CATEGORIES.get(stored.strip().lower(), stored)


def _charge_frequency(category: str) -> str:
    # FOCUS: usage repeats with consumption; purchases MUST NOT be "Usage-Based". Taxes, credits
    # and adjustments are single entries on one invoice.
    return "Usage-Based" if category == USAGE else "One-Time"


def _pricing_category(stored: str, category: str, committed: bool) -> str | None:
    if category == TAX:
        return None  # FOCUS: MUST be null for taxes
    if stored.strip():
        return _PRICING_CATEGORIES.get(stored.strip().lower(), "Other")
    if category == USAGE:
        return "Committed" if committed else "Standard"
    if category == PURCHASE:
        return "Standard"  # FOCUS examples price commitment purchases as Standard
    return None


def service_category_focus(stored: str) -> str | None:
    """A stored ServiceCategory as one of FOCUS's allowed values; None when blank."""
    if not stored.strip():
        return None
    return _SERVICE_CATEGORY_BY_LOWER.get(stored.strip().lower(), "Other")


def _service_category_guess(service_name: str) -> str:
    lowered = service_name.lower()
    for keywords, category in _SERVICE_KEYWORDS:
        if any(keyword in lowered for keyword in keywords):
            return category
    return "Other"


def _resource_type(item: Mapping[str, Any], resource_id: str | None) -> str | None:
    if resource_id is None:
        return None  # FOCUS: null when ResourceId is null
    if _text(item["resource_type"]):
        return str(item["resource_type"])
    arn = _ARN_RE.match(resource_id)
    if arn is not None:
        kind = re.split(r"[/:]", arn["resource"], maxsplit=1)
        return kind[0] if len(kind) > 1 else f"{arn['service']} resource"
    azure = _AZURE_TYPE_RE.search(resource_id)
    if azure is not None:
        return f"{azure['namespace']}/{azure['type']}"
    # FOCUS: MUST NOT be null when ResourceId is set.
    return f"{item['service_name'] or item['provider_name']} resource"


def _commitment_type(stored: str, commitment_id: str) -> str:
    if stored.strip():
        return stored
    lowered = commitment_id.lower()
    if "savingsplan" in lowered or "savings-plan" in lowered:
        return "Savings Plan"
    if "reserv" in lowered:
        return "Reservation"
    if "commitment" in lowered:
        return "Committed Use Discount"
    return "Commitment Discount"


def _commitment_category(commitment_type: str) -> str:
    # Savings plans and spend-based commitments commit to an amount of money; reservations and
    # resource-based committed-use discounts commit to an amount of a resource.
    lowered = commitment_type.lower()
    return "Spend" if "savings plan" in lowered or "spend" in lowered else "Usage"


def _commitment_status(stored: str, category: str) -> str | None:
    if category != USAGE:
        return None  # FOCUS defines the status on usage rows only
    lowered = stored.strip().lower()
    # A usage row that names a commitment received its price (FOCUS "Used") unless marked unused.
    return "Unused" if lowered == "unused" else "Used"


def _commitment_columns(item: Mapping[str, Any], category: str) -> dict[str, Any]:
    commitment_id = _text(item["commitment_discount_id"])
    if commitment_id is None:
        return dict.fromkeys(
            (
                "CommitmentDiscountCategory",
                "CommitmentDiscountId",
                "CommitmentDiscountName",
                "CommitmentDiscountQuantity",
                "CommitmentDiscountStatus",
                "CommitmentDiscountType",
                "CommitmentDiscountUnit",
            )
        )
    kind = _commitment_type(item["commitment_discount_type"], commitment_id)
    status = _commitment_status(item["commitment_discount_status"], category)
    quantity: Decimal | None = None
    if category == USAGE:
        # The share of the commitment this row used (or left unused), in money: the FOCUS 1.2
        # commitment examples express it so, and it is the one measure every provider gives.
        quantity = item["effective_cost"]
    elif category == PURCHASE:
        quantity = item["billed_cost"]
    return {
        "CommitmentDiscountCategory": _commitment_category(kind),
        "CommitmentDiscountId": commitment_id,
        "CommitmentDiscountName": None,  # not stored; FOCUS allows null without a display name
        "CommitmentDiscountQuantity": quantity,
        "CommitmentDiscountStatus": status,
        "CommitmentDiscountType": kind,
        "CommitmentDiscountUnit": item["billing_currency"] if quantity is not None else None,
    }


def _costs(item: Mapping[str, Any], committed: bool) -> tuple[Decimal, Decimal]:
    """(ListCost, ContractedCost); FOCUS requires both on every row.

    Where the source left them out: a charge without negotiated or commitment pricing costs what
    was billed; commitment-covered usage was billed 0, so its contracted cost is at least the
    amortized EffectiveCost, the best figure we hold. ListCost falls back to ContractedCost.
    """
    contracted = item["contracted_cost"]
    if contracted is None:
        covered = committed and item["charge_category"] == USAGE
        contracted = item["effective_cost"] if covered else item["billed_cost"]
    listed = item["list_cost"] if item["list_cost"] is not None else contracted
    return listed, contracted


def _pricing_columns(
    item: Mapping[str, Any], category: str, list_cost: Decimal, contracted_cost: Decimal
) -> dict[str, Any]:
    """PricingQuantity, PricingUnit and the unit prices, which FOCUS requires on usage and
    purchase rows (null on taxes) and which must multiply back to ListCost and ContractedCost.

    The ledger keeps ConsumedQuantity, not PricingQuantity; they are the same measure for the
    SKUs we bill, so it stands in. A row without a usable quantity (purchases, unused
    commitments, zero quantity at a non-zero cost, a sign that would make a price negative) is
    priced as a lump sum: 1 (or -1 for a refund) "Units" at the row's cost.
    """
    if category not in _PRICED:
        columns: dict[str, Any] = dict.fromkeys(
            (
                "PricingQuantity",
                "PricingUnit",
                "ListUnitPrice",
                "ContractedUnitPrice",
                "PricingCurrencyListUnitPrice",
                "PricingCurrencyContractedUnitPrice",
            )
        )
        unpriced: Decimal | None = item["consumed_quantity"]
        if category != TAX and unpriced and _text(item["consumed_unit"]):
            # An adjustment or credit the source measured (OCI adjusts "8 OCPU Per Hour"):
            # FOCUS allows its quantity and unit (null only on taxes), the unit prices stay
            # null (they MAY), so nothing has to multiply back to a cost.
            columns["PricingQuantity"] = unpriced.quantize(_QUANTITY_QUANTUM)
            columns["PricingUnit"] = focus_unit(item["consumed_unit"])
        return columns
    quantity: Decimal | None = item["consumed_quantity"]
    unit = focus_unit(item["consumed_unit"]) if _text(item["consumed_unit"]) else LUMP_SUM_UNIT
    prices: tuple[Decimal, Decimal] | None = None
    if quantity is not None and quantity != 0:
        prices = (_divide(list_cost, quantity), _divide(contracted_cost, quantity))
    elif quantity is not None and list_cost == 0 and contracted_cost == 0:
        prices = (_ZERO, _ZERO)
    if prices is None or min(prices) < 0:
        refund = list_cost < 0 or contracted_cost < 0
        quantity, unit = (-_ONE if refund else _ONE), LUMP_SUM_UNIT
        prices = (_divide(list_cost, quantity), _divide(contracted_cost, quantity))
    assert quantity is not None
    return {
        "PricingQuantity": quantity.quantize(_QUANTITY_QUANTUM),
        "PricingUnit": unit,
        "ListUnitPrice": prices[0],
        "ContractedUnitPrice": prices[1],
        "PricingCurrencyListUnitPrice": prices[0],
        "PricingCurrencyContractedUnitPrice": prices[1],
    }


def _consumption(item: Mapping[str, Any], category: str, status: str | None) -> dict[str, Any]:
    # FOCUS: ConsumedQuantity only on usage rows, and not on the unused part of a commitment.
    quantity = item["consumed_quantity"] if category == USAGE and status != "Unused" else None
    unit = None
    if quantity is not None:
        stored_unit = _text(item["consumed_unit"])
        unit = focus_unit(stored_unit) if stored_unit else LUMP_SUM_UNIT
        quantity = quantity.quantize(_QUANTITY_QUANTUM)
    return {"ConsumedQuantity": quantity, "ConsumedUnit": unit}


def _charge_description(item: Mapping[str, Any], category: str, service_name: str) -> str:
    detail = _text(item["x_instance_type"]) or _text(item["sku_id"]) or _text(item["resource_type"])
    text = f"{service_name} {category.lower()}"
    return f"{text}: {detail}" if detail else text


def _credits(credits: object) -> str | None:
    if not credits:
        return None
    return json.dumps(credits, ensure_ascii=False, separators=(",", ":"))


def _tags(tags: object) -> str | None:
    if not tags:
        return None
    return json.dumps(tags, ensure_ascii=False, separators=(",", ":"))


def focus_row(item: Mapping[str, Any], *, service_categories: Mapping[str, str]) -> dict[str, Any]:
    """One CostLineItem (as a dict of its fields) -> one FOCUS 1.2 row (column -> value)."""
    category = _charge_category(item["charge_category"])
    provider = _text(item["provider_name"]) or str(item["source"])
    service_name = _text(item["service_name"]) or provider
    service_category = service_categories.get(service_name) or _service_category_guess(service_name)
    commitment = _commitment_columns(item, category)
    committed = commitment["CommitmentDiscountId"] is not None
    list_cost, contracted_cost = _costs(item, committed)
    account = _text(item["billing_account_id"]) or str(item["source"])
    sub_account = _text(item["sub_account_id"])
    # The names the source gave; FOCUS requires a SubAccountName wherever there is a
    # SubAccountId, so a source without names (legacy CUR, GCP's billing account) keeps the id.
    account_name = _text(item["billing_account_name"]) or account
    sub_account_name = (_text(item["sub_account_name"]) or sub_account) if sub_account else None
    region = _text(item["region_id"])
    resource_id = _text(item["resource_id"])
    sku = _sku(item, category, service_name)
    period_end = item["billing_period_end"] or _midnight_utc(month_next(item["billing_period"]))
    row: dict[str, Any] = {
        "AvailabilityZone": None,
        "BilledCost": item["billed_cost"],
        "BillingAccountId": account,
        "BillingAccountName": account_name,
        "BillingAccountType": "Management Account" if provider == "AWS" else "Billing Account",
        "BillingCurrency": item["billing_currency"],
        "BillingPeriodEnd": period_end,
        "BillingPeriodStart": item["billing_period_start"],
        "CapacityReservationId": None,
        "CapacityReservationStatus": None,
        "ChargeCategory": category,
        "ChargeClass": None,
        "ChargeDescription": _charge_description(item, category, service_name),
        "ChargeFrequency": _charge_frequency(category),
        "ChargePeriodEnd": item["charge_period_end"],
        "ChargePeriodStart": item["charge_period_start"],
        **commitment,
        **_consumption(item, category, commitment["CommitmentDiscountStatus"]),
        "ContractedCost": contracted_cost,
        "EffectiveCost": item["effective_cost"],
        "InvoiceId": None,
        # Not stored: the provider invoices its own charges. (FOCUS requires BilledCost 0 where
        # the two differ, i.e. where a third party is paid.)
        "InvoiceIssuerName": provider,
        "ListCost": list_cost,
        "PricingCategory": _pricing_category(item["pricing_category"], category, committed),
        "PricingCurrency": item["billing_currency"],
        "PricingCurrencyEffectiveCost": item["effective_cost"],
        **_pricing_columns(item, category, list_cost, contracted_cost),
        "ProviderName": provider,
        "PublisherName": provider,
        "RegionId": region,
        "RegionName": region,
        "ResourceId": resource_id,
        "ResourceName": _text(item["resource_name"]) if resource_id else None,
        "ResourceType": _resource_type(item, resource_id),
        "ServiceCategory": service_category,
        "ServiceName": service_name,
        "ServiceSubcategory": f"Other ({service_category})",
        "SkuId": sku,
        "SkuMeter": f"{service_category} {category}" if sku else None,
        "SkuPriceDetails": None,
        "SkuPriceId": sku,
        "SubAccountId": sub_account,
        "SubAccountName": sub_account_name,
        "SubAccountType": (
            _SUB_ACCOUNT_TYPES.get(provider.lower(), "Sub Account") if sub_account else None
        ),
        "Tags": _tags(item["tags"]),
        "x_InstanceType": _text(item["x_instance_type"]),
        "x_GpuCount": item["x_gpu_count"],
        "x_GpuModel": _text(item["x_gpu_model"]),
        "x_Credits": _credits(item["x_credits"]),
    }
    return row


def _sku(item: Mapping[str, Any], category: str, service_name: str) -> str | None:
    if category == TAX:
        return None  # FOCUS: MUST be null for taxes
    # FOCUS requires a SkuId on usage and purchases; a support plan bought without one is
    # identified by its service.
    return _text(item["sku_id"]) or (service_name if category in _PRICED else None)
