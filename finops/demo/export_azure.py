"""The Azure bill as an EA amortised cost-details export (daily rows), derived from the demo's
FOCUS rows.

Amortised cost is what Azure's own file shows: reservation-covered VM hours carry the
reservation's rate (PricingModel Reservation), the hours the reservation covered nothing are
`UnusedReservation` rows, on-demand and spot hours their price (PricingModel OnDemand / Spot).
The reservation purchase itself is not in the amortised view. Rows are per resource and day
(`Date`, MM/DD/YYYY as EA writes it), so a node's hours of a day are one row. The columns are
those of Microsoft's EA amortised sample (../shared/samples/azure); VM rows carry their size in
AdditionalInfo.ServiceType and their Tags as Azure writes them, without the outer braces.

Over the month the Cost column sums to the FOCUS file's EffectiveCost total.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

from finops.demo.fleet import Month
from finops.demo.focus_catalogue import PROVIDERS, Row, money

EA_COLUMNS = (
    "BillingAccountId", "BillingAccountName", "BillingPeriodStartDate", "BillingPeriodEndDate",
    "BillingProfileId", "BillingProfileName", "AccountOwnerId", "AccountName", "SubscriptionId",
    "SubscriptionName", "Date", "Product", "PartNumber", "MeterId", "ServiceFamily",
    "MeterCategory", "MeterSubCategory", "MeterRegion", "MeterName", "Quantity",
    "EffectivePrice", "Cost", "UnitPrice", "BillingCurrency", "ResourceLocation",
    "AvailabilityZone", "ConsumedService", "ResourceId", "ResourceName", "ServiceInfo1",
    "ServiceInfo2", "AdditionalInfo", "Tags", "InvoiceSectionId", "InvoiceSection",
    "CostCenter", "UnitOfMeasure", "ResourceGroup", "ReservationId", "ReservationName",
    "ProductOrderId", "ProductOrderName", "OfferId", "IsAzureCreditEligible", "Term",
    "PublisherName", "PlanName", "ChargeType", "Frequency", "PublisherType", "PayGPrice",
    "PricingModel", "CostAllocationRuleName", "benefitId", "benefitName",
)  # fmt: skip

ENROLLMENT = "81234567"
_PRICING_MODEL = {"Standard": "OnDemand", "Committed": "Reservation", "Dynamic": "Spot"}
# VM size -> (meter subcategory, meter name).
_METERS = {
    "Standard_ND96isr_H100_v5": ("NDisrH100v5 Series", "ND96isr H100 v5"),
    "Standard_ND96amsr_A100_v4": ("NDamsrA100v4 Series", "ND96amsr A100 v4"),
}
_SERVICES = {
    ("Storage", "Object Storage"): ("Storage", "Tiered Block Blob", "Hot LRS Data Stored"),
    ("Storage", "Block Storage"): ("Storage", "Premium SSD Managed Disks", "P40 LRS Disk"),
    ("Bandwidth", "Network Connectivity"): ("Bandwidth", "Rtn Preference: MGN", "Standard Data "
                                            "Transfer Out"),
}  # fmt: skip


def _ea_date(moment: date) -> str:
    return moment.strftime("%m/%d/%Y")


def _day(focus_time: str) -> str:
    return _ea_date(date.fromisoformat(focus_time[:10]))


def _guid(text: str) -> str:
    digest = f"{abs(hash_text(text)):032x}"[:32]
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:]}"


def hash_text(text: str) -> int:
    """A stable (process-independent) hash: Python's hash() of a str is salted per run."""
    value = 0
    for char in text:
        value = (value * 131 + ord(char)) % (1 << 128)
    return value


def _tags(tags: str, braces: bool) -> str:
    if not tags:
        return ""
    text = ",".join(f'"{k}": "{v}"' for k, v in sorted(json.loads(tags).items()))
    return "{" + text + "}" if braces else text


class _Writer:
    def __init__(self, month: Month) -> None:
        self.spec = PROVIDERS["Azure"]
        self.month = month
        self.rows: list[Row] = []

    def base(self, focus: Row, day: str) -> Row:
        row = dict.fromkeys(EA_COLUMNS, "")
        subscription = focus["SubAccountId"].rsplit("/", 1)[-1]
        last_day = self.month.end - timedelta(days=1)
        row.update(
            BillingAccountId=ENROLLMENT,
            BillingAccountName=self.spec.billing_account_name,
            BillingPeriodStartDate=_ea_date(self.month.start),
            BillingPeriodEndDate=_ea_date(last_day),
            BillingProfileId=ENROLLMENT,
            BillingProfileName=self.spec.billing_account_name,
            AccountOwnerId="finops@acme.example",
            AccountName="Acme ML",
            SubscriptionId=subscription,
            SubscriptionName=focus["SubAccountName"],
            Date=day,
            BillingCurrency="USD",
            ResourceLocation="westus3",
            InvoiceSectionId="acme-ml",
            InvoiceSection="Acme ML",
            OfferId="MS-AZR-0017P",
            IsAzureCreditEligible="True",
            Frequency="UsageBased",
            PublisherType="Azure",
            PublisherName="Microsoft",
            ChargeType="Usage",
            PricingModel="OnDemand",
        )
        self.rows.append(row)
        return row


def _vm_rows(writer: _Writer, hours: list[Row]) -> None:
    """One row for a VM's hours of one day under one pricing model."""
    first = hours[0]
    size = first["x_InstanceType"]
    subcategory, meter = _METERS[size]
    model = _PRICING_MODEL[first["PricingCategory"]]
    if model == "Spot":
        meter += " Spot"
    quantity = Decimal(len(hours))
    cost = sum((Decimal(h["EffectiveCost"]) for h in hours), Decimal(0))
    list_price = Decimal(first["ListUnitPrice"])
    row = writer.base(first, _day(first["ChargePeriodStart"]))
    group = first["ResourceId"].split("/resourcegroups/")[1].split("/")[0]
    row.update(
        Product=f"Virtual Machines {subcategory} - {meter} - US West 3",
        PartNumber=f"AAH-{hash_text(size) % 100000:05d}",
        MeterId=_guid(f"{size}:{model}"),
        ServiceFamily="Compute",
        MeterCategory="Virtual Machines",
        MeterSubCategory=subcategory,
        MeterRegion="US West 3",
        MeterName=meter,
        Quantity=money(quantity),
        EffectivePrice=money(cost / quantity),
        Cost=money(cost),
        UnitPrice=money(list_price),
        PayGPrice=money(list_price),
        AvailabilityZone="1",
        ConsumedService="Microsoft.Compute",
        ResourceId=first["ResourceId"],
        ResourceName=first["ResourceName"],
        ServiceInfo2="Canonical",
        AdditionalInfo=json.dumps(
            {
                "UsageType": "ComputeHR",
                "ImageType": "Canonical",
                "ServiceType": size,
                "VMName": first["ResourceName"],
                "VMProperties": "Microsoft.AKS.Compute.AKS.Linux.Billing",
                "VCPUs": 96,
                "ConsumedQuantity": float(quantity),
            },
            separators=(",", ":"),
        ),
        Tags=_tags(first["Tags"], braces=False),
        UnitOfMeasure="1 Hour",
        ResourceGroup=group,
        PricingModel=model,
    )
    if model == "Reservation":
        _reservation_columns(row, first)


def _reservation_columns(row: Row, focus: Row) -> None:
    reservation = focus["CommitmentDiscountId"]
    order = reservation.split("/reservationOrders/")[1].split("/")[0]
    row.update(
        ReservationId=reservation.rsplit("/", 1)[-1],
        ReservationName=focus["CommitmentDiscountName"],
        ProductOrderId=order,
        ProductOrderName="Reserved VM Instance, Standard_ND96isr_H100_v5, US West 3, 1 Year",
        Term="12",
        benefitId=reservation,
        benefitName=focus["CommitmentDiscountName"],
    )


def _unused_row(writer: _Writer, hours: list[Row]) -> None:
    first = hours[0]
    cost = sum((Decimal(h["EffectiveCost"]) for h in hours), Decimal(0))
    quantity = sum((Decimal(h["PricingQuantity"]) for h in hours), Decimal(0))
    row = writer.base(first, _day(first["ChargePeriodStart"]))
    row.update(
        Product="Virtual Machines NDisrH100v5 Series - ND96isr H100 v5 - US West 3",
        MeterId=_guid("Standard_ND96isr_H100_v5:Reservation"),
        ServiceFamily="Compute",
        MeterCategory="Virtual Machines",
        MeterSubCategory="NDisrH100v5 Series",
        MeterRegion="US West 3",
        MeterName="ND96isr H100 v5",
        Quantity=money(quantity),
        EffectivePrice=money(cost / quantity),
        Cost=money(cost),
        UnitOfMeasure="1 Hour",
        ChargeType="UnusedReservation",
        PricingModel="Reservation",
        AdditionalInfo=json.dumps({"ServiceType": "Standard_ND96isr_H100_v5"}),
    )
    _reservation_columns(row, first)


def _service_row(writer: _Writer, focus: Row) -> None:
    category, subcategory, meter = _SERVICES[(focus["ServiceName"], focus["ServiceSubcategory"])]
    row = writer.base(focus, _day(focus["ChargePeriodStart"]))
    group = ""
    if "/resourcegroups/" in focus["ResourceId"]:
        group = focus["ResourceId"].split("/resourcegroups/")[1].split("/")[0]
    row.update(
        Product=f"{subcategory} - {meter} - US West 3",
        MeterId=_guid(meter),
        ServiceFamily="Storage" if category == "Storage" else "Networking",
        MeterCategory=category,
        MeterSubCategory=subcategory,
        MeterRegion="US West 3",
        MeterName=meter,
        Quantity=focus["ConsumedQuantity"],
        EffectivePrice=focus["ListUnitPrice"],
        Cost=focus["EffectiveCost"],
        UnitPrice=focus["ListUnitPrice"],
        PayGPrice=focus["ListUnitPrice"],
        ConsumedService="Microsoft.Storage" if category == "Storage" else "Microsoft.Network",
        ResourceId=focus["ResourceId"],
        ResourceName=focus["ResourceName"],
        Tags=_tags(focus["Tags"], braces=True),
        UnitOfMeasure="1 GB/Month" if focus["ConsumedUnit"] == "GB/Month" else "1 GB",
        ResourceGroup=group,
    )


def _support_row(writer: _Writer, focus: Row) -> None:
    row = writer.base(focus, _ea_date(writer.month.start))
    row.update(
        Product="Azure Support Plan: Professional Direct",
        MeterId=_guid("support"),
        ServiceFamily="Azure Support",
        MeterCategory="Azure Support",
        MeterName="Professional Direct",
        Quantity="1",
        EffectivePrice=focus["BilledCost"],
        Cost=focus["BilledCost"],
        UnitPrice=focus["BilledCost"],
        PayGPrice=focus["BilledCost"],
        ConsumedService="Microsoft.Support",
        UnitOfMeasure="1/Month",
        ChargeType="Purchase",
        Frequency="Recurring",
    )


def amortised_rows(*, focus_rows: list[Row], month: Month) -> list[Row]:
    """The EA amortised cost rows of the Azure bill whose FOCUS rows are `focus_rows`."""
    writer = _Writer(month)
    vm_days: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    unused_days: dict[str, list[Row]] = defaultdict(list)
    for focus in focus_rows:
        day = focus["ChargePeriodStart"][:10]
        if focus["x_InstanceType"]:
            vm_days[(day, focus["ResourceName"], focus["PricingCategory"])].append(focus)
        elif focus["CommitmentDiscountStatus"] == "Unused":
            unused_days[day].append(focus)
        elif focus["ChargeCategory"] == "Purchase" and focus["CommitmentDiscountId"]:
            continue  # amortised: the purchase is spread onto usage and unused rows
        elif focus["ChargeCategory"] == "Purchase":
            _support_row(writer, focus)
        else:
            _service_row(writer, focus)
    for _, hours in sorted(vm_days.items()):
        _vm_rows(writer, hours)
    for _, hours in sorted(unused_days.items()):
        _unused_row(writer, hours)
    return writer.rows
