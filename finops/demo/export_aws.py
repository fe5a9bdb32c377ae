"""The AWS bill as a CUR 2.0 (Data Exports) CSV, derived from the demo's FOCUS rows.

The same charges, spelled the way AWS writes them:
- on-demand hours are `Usage` with usage type `USE1-BoxUsage:<type>`, spot hours `Usage` with
  `USE1-SpotUsage:<type>` (priced at that day's spot price);
- Savings Plan hours are `SavingsPlanCoveredUsage` at the on-demand price, with the plan's rate
  in `savings_plan_savings_plan_effective_cost`, each followed by its `SavingsPlanNegation`
  (minus the on-demand price), so the invoice shows the plan's fee, not the usage;
- the plan's fee is a `SavingsPlanRecurringFee` row per hour: its `total_commitment_to_date` is
  the hourly commitment, `used_commitment` what covered usage took that hour;
- support is a `Fee`, tax a `Tax`, the Activate credit a `Credit`.

Amortised per AWS's rules, the file's EffectiveCost equals the FOCUS file's, row group by row
group: covered usage carries the plan rate, the recurring fee its unused part (see
`amortised_cost`, which the tests apply to the file as written).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal

from finops.demo.fleet import HOUR, Month
from finops.demo.focus_catalogue import PROVIDERS, Row, money

CUR_COLUMNS = (
    "bill_bill_type",
    "bill_billing_entity",
    "bill_billing_period_end_date",
    "bill_billing_period_start_date",
    "bill_invoice_id",
    "bill_invoicing_entity",
    "bill_payer_account_id",
    "bill_payer_account_name",
    "identity_line_item_id",
    "identity_time_interval",
    "line_item_availability_zone",
    "line_item_blended_cost",
    "line_item_blended_rate",
    "line_item_currency_code",
    "line_item_legal_entity",
    "line_item_line_item_description",
    "line_item_line_item_type",
    "line_item_net_unblended_cost",
    "line_item_normalization_factor",
    "line_item_operation",
    "line_item_product_code",
    "line_item_resource_id",
    "line_item_tax_type",
    "line_item_unblended_cost",
    "line_item_unblended_rate",
    "line_item_usage_account_id",
    "line_item_usage_account_name",
    "line_item_usage_amount",
    "line_item_usage_end_date",
    "line_item_usage_start_date",
    "line_item_usage_type",
    "pricing_currency",
    "pricing_public_on_demand_cost",
    "pricing_public_on_demand_rate",
    "pricing_purchase_option",
    "pricing_term",
    "pricing_unit",
    "product",
    "product_fee_code",
    "product_instance_family",
    "product_instance_type",
    "product_location",
    "product_product_family",
    "product_region_code",
    "product_servicecode",
    "product_sku",
    "reservation_effective_cost",
    "reservation_reservation_a_r_n",
    "resource_tags",
    "savings_plan_amortized_upfront_commitment_for_billing_period",
    "savings_plan_end_time",
    "savings_plan_offering_type",
    "savings_plan_payment_option",
    "savings_plan_purchase_term",
    "savings_plan_recurring_commitment_for_billing_period",
    "savings_plan_region",
    "savings_plan_savings_plan_a_r_n",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_savings_plan_rate",
    "savings_plan_start_time",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
)

_ENTITY = "Amazon Web Services, Inc."
_LOCATION = "US East (N. Virginia)"
_REGION_PREFIX = "USE1"
# FOCUS ServiceName -> (product code, product name, usage type, operation, product family).
_SERVICES = {
    "Amazon Simple Storage Service": (
        "AmazonS3", "Amazon Simple Storage Service", "USE1-TimedStorage-ByteHrs",
        "StandardStorage", "Storage",
    ),
    "Amazon FSx": (
        "AmazonFSx", "Amazon FSx", "USE1-Lustre-PersistentStorage", "CreateFileSystem",
        "Storage",
    ),
    "AWS Data Transfer": (
        "AWSDataTransfer", "AWS Data Transfer", "USE1-DataTransfer-Out-Bytes", "",
        "Data Transfer",
    ),
}  # fmt: skip
_SUPPORT_CODE = "AWSSupportEnterpriseOnRamp"


def _cur_time(focus_time: str) -> str:
    # CUR 2.0 CSV writes milliseconds: 2025-10-01T00:00:00.000Z.
    return focus_time.replace("Z", ".000Z")


def _tags(row: Row) -> str:
    """CUR 2.0 `resource_tags`: a JSON map of user tags, keys prefixed `user_`, lower-cased."""
    if not row["Tags"]:
        return ""
    tags = json.loads(row["Tags"])
    return json.dumps({f"user_{key.lower()}": value for key, value in sorted(tags.items())})


class _Writer:
    def __init__(self, month: Month, invoice: str) -> None:
        spec = PROVIDERS["AWS"]
        self.spec = spec
        self.month = month
        self.invoice = invoice
        self.rows: list[Row] = []
        self.counter = 0

    def base(self, focus: Row) -> Row:
        self.counter += 1
        row = dict.fromkeys(CUR_COLUMNS, "")
        start, end = _cur_time(focus["ChargePeriodStart"]), _cur_time(focus["ChargePeriodEnd"])
        row.update(
            bill_bill_type="Anniversary",
            bill_billing_entity="AWS",
            bill_billing_period_start_date=_cur_time(focus["BillingPeriodStart"]),
            bill_billing_period_end_date=_cur_time(focus["BillingPeriodEnd"]),
            bill_invoice_id=self.invoice,
            bill_invoicing_entity=_ENTITY,
            bill_payer_account_id=self.spec.billing_account_id,
            bill_payer_account_name=self.spec.billing_account_name,
            identity_line_item_id=f"{self.counter:012x}",
            identity_time_interval=f"{start}/{end}",
            line_item_currency_code="USD",
            line_item_legal_entity=_ENTITY,
            line_item_usage_account_id=focus["SubAccountId"],
            line_item_usage_account_name=focus["SubAccountName"],
            line_item_usage_start_date=start,
            line_item_usage_end_date=end,
            pricing_currency="USD",
            resource_tags=_tags(focus),
        )
        self.rows.append(row)
        return row

    @staticmethod
    def cost(row: Row, amount: Decimal) -> None:
        row["line_item_unblended_cost"] = money(amount)
        row["line_item_blended_cost"] = money(amount)
        row["line_item_net_unblended_cost"] = money(amount)


def _instance_columns(row: Row, focus: Row) -> None:
    itype = focus["x_InstanceType"]
    instance_id = focus["ResourceId"].rsplit("/", 1)[-1]
    spot = focus["PricingCategory"] == "Dynamic"
    usage = "SpotUsage" if spot else "BoxUsage"
    row.update(
        line_item_availability_zone=focus["AvailabilityZone"],
        line_item_operation="RunInstances:SV001" if spot else "RunInstances",
        line_item_product_code="AmazonEC2",
        line_item_resource_id=instance_id,
        line_item_usage_amount="1",
        line_item_usage_type=f"{_REGION_PREFIX}-{usage}:{itype}",
        line_item_normalization_factor="384" if itype.startswith("p5") else "192",
        pricing_public_on_demand_cost=focus["ListCost"],
        pricing_public_on_demand_rate=focus["ListUnitPrice"],
        pricing_purchase_option="Spot" if spot else "On Demand",
        pricing_term="Spot" if spot else "OnDemand",
        pricing_unit="Hrs",
        product=json.dumps(
            {
                "product_name": "Amazon Elastic Compute Cloud",
                "operating_system": "Linux",
                "tenancy": "Shared",
                "gpu": "8",
                "region": "us-east-1",
            }
        ),
        product_instance_family="Accelerated Computing",
        product_instance_type=itype,
        product_location=_LOCATION,
        product_product_family="Compute Instance",
        product_region_code="us-east-1",
        product_servicecode="AmazonEC2",
        product_sku=focus["SkuId"],
    )


def _plan_columns(row: Row, focus: Row, plan: Row) -> None:
    row.update(
        savings_plan_savings_plan_a_r_n=plan["CommitmentDiscountId"],
        savings_plan_offering_type="EC2InstanceSavingsPlans",
        savings_plan_payment_option="No Upfront",
        savings_plan_purchase_term="3yr",
        savings_plan_region="US East (N. Virginia)",
        savings_plan_start_time="2024-01-01T00:00:00.000Z",
        savings_plan_end_time="2027-01-01T00:00:00.000Z",
        savings_plan_recurring_commitment_for_billing_period=plan["BilledCost"],
        savings_plan_amortized_upfront_commitment_for_billing_period="0",
    )


def _covered(writer: _Writer, focus: Row, plan: Row) -> None:
    """SavingsPlanCoveredUsage at the on-demand price, then its negation."""
    list_cost = Decimal(focus["ListCost"])
    covered = writer.base(focus)
    _instance_columns(covered, focus)
    _plan_columns(covered, focus, plan)
    writer.cost(covered, list_cost)
    covered.update(
        line_item_line_item_type="SavingsPlanCoveredUsage",
        line_item_line_item_description=(
            f"USD {focus['ListUnitPrice']} per On Demand Linux {focus['x_InstanceType']} Instance"
            " Hour"
        ),
        line_item_unblended_rate=focus["ListUnitPrice"],
        line_item_blended_rate=focus["ListUnitPrice"],
        savings_plan_savings_plan_effective_cost=focus["EffectiveCost"],
        savings_plan_savings_plan_rate=focus["EffectiveCost"],
    )
    negation = writer.base(focus)
    _instance_columns(negation, focus)
    _plan_columns(negation, focus, plan)
    writer.cost(negation, -list_cost)
    negation.update(
        line_item_line_item_type="SavingsPlanNegation",
        line_item_line_item_description=(
            f"SavingsPlanNegation used by AccountId : {focus['SubAccountId']} and UsageSku : "
            f"{focus['SkuId']}"
        ),
        line_item_unblended_rate=money(-Decimal(focus["ListUnitPrice"])),
        line_item_usage_amount="1",
        pricing_public_on_demand_cost="0",
    )


def _recurring_fees(writer: _Writer, plan: Row, unused: dict[str, Row], hours: int) -> None:
    """One SavingsPlanRecurringFee per hour of the month: the hourly commitment, and how much of
    it covered usage consumed (everything but that hour's unused part)."""
    hourly = Decimal(plan["BilledCost"]) / hours
    assert hourly * hours == Decimal(plan["BilledCost"])
    for hour in range(hours):
        start = writer.month.start.timestamp() + hour * HOUR
        focus = dict(plan)
        focus["ChargePeriodStart"] = _stamp(start)
        focus["ChargePeriodEnd"] = _stamp(start + HOUR)
        idle = unused.get(focus["ChargePeriodStart"])
        used = hourly - (Decimal(idle["EffectiveCost"]) if idle else Decimal(0))
        row = writer.base(focus)
        _plan_columns(row, focus, plan)
        writer.cost(row, hourly)
        row.update(
            line_item_line_item_type="SavingsPlanRecurringFee",
            line_item_line_item_description=f"{plan['CommitmentDiscountName']}: hourly commitment",
            line_item_product_code="ComputeSavingsPlans",
            line_item_resource_id=plan["CommitmentDiscountId"],
            line_item_usage_amount="1",
            line_item_usage_type="ComputeSP:3yrNoUpfront",
            line_item_unblended_rate=money(hourly),
            pricing_unit="Hrs",
            savings_plan_total_commitment_to_date=money(hourly),
            savings_plan_used_commitment=money(used),
        )


def _stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _service_row(writer: _Writer, focus: Row) -> None:
    code, name, usage_type, operation, family = _SERVICES[focus["ServiceName"]]
    row = writer.base(focus)
    writer.cost(row, Decimal(focus["BilledCost"]))
    resource = focus["ResourceId"]
    if resource.startswith("arn:aws:s3:::"):
        resource = resource.removeprefix("arn:aws:s3:::")
    row.update(
        line_item_line_item_type="Usage",
        line_item_line_item_description=focus["ChargeDescription"],
        line_item_operation=operation,
        line_item_product_code=code,
        line_item_resource_id=resource,
        line_item_usage_amount=focus["ConsumedQuantity"],
        line_item_usage_type=usage_type,
        line_item_unblended_rate=focus["ListUnitPrice"],
        line_item_blended_rate=focus["ListUnitPrice"],
        pricing_public_on_demand_cost=focus["ListCost"],
        pricing_public_on_demand_rate=focus["ListUnitPrice"],
        pricing_term="OnDemand",
        pricing_unit=focus["ConsumedUnit"],
        product=json.dumps({"product_name": name, "region": "us-east-1"}),
        product_location=_LOCATION,
        product_product_family=family,
        product_region_code="us-east-1",
        product_servicecode=code,
        product_sku=focus["SkuId"],
    )


def _monthly_row(writer: _Writer, focus: Row) -> None:
    kind = {"Purchase": "Fee", "Tax": "Tax", "Credit": "Credit"}[focus["ChargeCategory"]]
    row = writer.base(focus)
    writer.cost(row, Decimal(focus["BilledCost"]))
    code = "AmazonEC2" if kind == "Credit" else _SUPPORT_CODE
    row.update(
        line_item_line_item_type=kind,
        line_item_line_item_description=focus["ChargeDescription"],
        line_item_product_code=code,
        line_item_tax_type="Sales tax" if kind == "Tax" else "",
        product=json.dumps({"product_name": focus["ServiceName"]}),
        product_fee_code=_SUPPORT_CODE if kind == "Fee" else "",
        product_servicecode=code,
    )


def cur_rows(*, focus_rows: list[Row], month: Month) -> list[Row]:
    """The CUR 2.0 rows of the AWS bill whose FOCUS rows are `focus_rows`."""
    writer = _Writer(month, focus_rows[0]["InvoiceId"])
    plans = {r["CommitmentDiscountId"]: r for r in focus_rows if r["ChargeCategory"] == "Purchase"}
    unused: dict[str, dict[str, Row]] = defaultdict(dict)
    for focus in focus_rows:
        if focus["CommitmentDiscountStatus"] == "Unused":
            unused[focus["CommitmentDiscountId"]][focus["ChargePeriodStart"]] = focus
    for focus in focus_rows:
        if focus["x_InstanceType"]:
            if focus["CommitmentDiscountStatus"] == "Used":
                _covered(writer, focus, plans[focus["CommitmentDiscountId"]])
            else:
                row = writer.base(focus)
                _instance_columns(row, focus)
                writer.cost(row, Decimal(focus["BilledCost"]))
                row.update(
                    line_item_line_item_type="Usage",
                    line_item_line_item_description=focus["ChargeDescription"],
                    line_item_unblended_rate=focus["ContractedUnitPrice"],
                    line_item_blended_rate=focus["ContractedUnitPrice"],
                )
        elif focus["ServiceName"] in _SERVICES:
            _service_row(writer, focus)
        elif focus["CommitmentDiscountId"] and focus["ChargeCategory"] == "Purchase":
            _recurring_fees(writer, focus, unused[focus["CommitmentDiscountId"]], month.days * 24)
        elif focus["CommitmentDiscountStatus"] == "Unused":
            continue  # folded into the hourly recurring fee
        else:
            _monthly_row(writer, focus)
    return writer.rows


def amortised_cost(row: Row) -> Decimal:
    """AWS's amortised cost of one CUR row (../shared/samples/README.md, format facts)."""
    kind = row["line_item_line_item_type"]
    if kind == "SavingsPlanCoveredUsage":
        return Decimal(row["savings_plan_savings_plan_effective_cost"])
    if kind == "SavingsPlanRecurringFee":
        return Decimal(row["savings_plan_total_commitment_to_date"]) - Decimal(
            row["savings_plan_used_commitment"]
        )
    if kind in ("SavingsPlanNegation", "SavingsPlanUpfrontFee"):
        return Decimal(0)
    return Decimal(row["line_item_unblended_cost"])
