"""The billing files the ingest benchmark reads (bench/ingest.py): an AWS CUR 2.0 CSV and a FOCUS
1.2 CSV of any number of rows, generated from a seed (September 2024, hourly, five teams).
tests/ingest/test_ingest_fast_path.py parses files written by it on both parser paths."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

_INSTANCE_TYPES = ("p5.48xlarge", "p4d.24xlarge", "g5.12xlarge", "g6.xlarge", "m7i.large")
_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
_TEAMS = ("vision", "speech", "search", "ads", "infra")
_ACCOUNTS = tuple(f"{111111111111 + 7 * i}" for i in range(8))
# CUR line item types in rough real-world proportions, with the columns each one fills.
_CUR_TYPES = (
    ("Usage",) * 12
    + ("SavingsPlanCoveredUsage",) * 4
    + ("SavingsPlanNegation",) * 2
    + ("DiscountedUsage",) * 3
    + ("Tax", "Credit", "RIFee", "SavingsPlanRecurringFee")
)

CUR_COLUMNS = (
    "bill_bill_type",
    "bill_billing_entity",
    "bill_billing_period_end_date",
    "bill_billing_period_start_date",
    "bill_invoice_id",
    "bill_payer_account_id",
    "identity_line_item_id",
    "identity_time_interval",
    "line_item_availability_zone",
    "line_item_blended_cost",
    "line_item_currency_code",
    "line_item_line_item_description",
    "line_item_line_item_type",
    "line_item_net_unblended_cost",
    "line_item_operation",
    "line_item_product_code",
    "line_item_resource_id",
    "line_item_unblended_cost",
    "line_item_unblended_rate",
    "line_item_usage_account_id",
    "line_item_usage_amount",
    "line_item_usage_end_date",
    "line_item_usage_start_date",
    "line_item_usage_type",
    "pricing_public_on_demand_cost",
    "pricing_public_on_demand_rate",
    "pricing_term",
    "pricing_unit",
    "product",
    "product_instance_type",
    "product_product_family",
    "product_region_code",
    "product_servicecode",
    "product_sku",
    "reservation_effective_cost",
    "reservation_reservation_a_r_n",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "resource_tags",
    "savings_plan_savings_plan_a_r_n",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
)

FOCUS_COLUMNS = (
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "BilledCost",
    "ChargeCategory",
    "ChargeDescription",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountId",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "EffectiveCost",
    "ListCost",
    "PricingCategory",
    "ProviderName",
    "RegionId",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceDetails",
    "SubAccountId",
    "Tags",
)


def _csv_cell(value: str) -> str:
    if any(ch in value for ch in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def _money(rng: random.Random, high: float) -> str:
    # Up to 10 decimals, as CUR writes them: exercises the exact-decimal path, not floats.
    return f"{rng.uniform(0, high):.10f}".rstrip("0").rstrip(".") or "0"


def _hour_pairs() -> list[tuple[str, str]]:
    pairs = []
    for day in range(1, 31):
        for hour in range(24):
            start = f"2024-09-{day:02d}T{hour:02d}:00:00Z"
            end = (
                f"2024-09-{day:02d}T{hour + 1:02d}:00:00Z"
                if hour < 23
                else (f"2024-09-{day + 1:02d}T00:00:00Z" if day < 30 else "2024-10-01T00:00:00Z")
            )
            pairs.append((start, end))
    return pairs


def cur_rows(count: int, seed: int) -> Iterator[dict[str, str]]:
    rng = random.Random(seed)
    hours = _hour_pairs()
    resources = [f"i-{rng.getrandbits(64):016x}" for _ in range(2000)]
    sp_arn = "arn:aws:savingsplans::111111111111:savingsplan/sp-0123456789abcdef"
    ri_arn = "arn:aws:ec2:us-east-1:111111111111:reserved-instances/ri-0123456789abcdef"
    for index in range(count):
        start, end = hours[index % len(hours)]
        line_item_type = rng.choice(_CUR_TYPES)
        resource_index = rng.randrange(len(resources))
        instance_type = _INSTANCE_TYPES[resource_index % len(_INSTANCE_TYPES)]
        region = _REGIONS[resource_index % len(_REGIONS)]
        team = _TEAMS[resource_index % len(_TEAMS)]
        cost = _money(rng, 98.0)
        spot = line_item_type == "Usage" and resource_index % 7 == 0
        row = dict.fromkeys(CUR_COLUMNS, "")
        row.update(
            bill_bill_type="Anniversary",
            bill_billing_entity="AWS",
            bill_billing_period_start_date="2024-09-01T00:00:00Z",
            bill_billing_period_end_date="2024-10-01T00:00:00Z",
            bill_invoice_id="",
            bill_payer_account_id=_ACCOUNTS[0],
            identity_line_item_id=f"{rng.getrandbits(80):020x}",
            identity_time_interval=f"{start}/{end}",
            line_item_availability_zone=f"{region}a",
            line_item_blended_cost=cost,
            line_item_currency_code="USD",
            line_item_line_item_description=f"{instance_type} instance hour, {region}",
            line_item_line_item_type=line_item_type,
            line_item_net_unblended_cost=cost,
            line_item_operation="RunInstances",
            line_item_product_code="AmazonEC2",
            line_item_resource_id=resources[resource_index],
            line_item_unblended_cost=cost,
            line_item_unblended_rate="98.32",
            line_item_usage_account_id=_ACCOUNTS[resource_index % len(_ACCOUNTS)],
            line_item_usage_amount="1.0",
            line_item_usage_end_date=end,
            line_item_usage_start_date=start,
            line_item_usage_type=f"USE1-{'SpotUsage' if spot else 'BoxUsage'}:{instance_type}",
            pricing_public_on_demand_cost=cost,
            pricing_public_on_demand_rate="98.32",
            pricing_term="OnDemand",
            pricing_unit="Hrs",
            product=(
                '{"product_name":"Amazon Elastic Compute Cloud","operating_system":"Linux",'
                f'"region":"{region}"}}'
            ),
            product_instance_type=instance_type,
            product_product_family="Compute Instance",
            product_region_code=region,
            product_servicecode="AmazonEC2",
            product_sku=f"SKU{resource_index % 40:04d}",
            resource_tags=f'{{"user_team":"{team}","user_Name":"node-{resource_index}"}}',
        )
        if line_item_type in ("Tax", "Credit"):
            row["line_item_resource_id"] = ""
            row["resource_tags"] = ""
            if line_item_type == "Credit":
                row["line_item_unblended_cost"] = "-" + cost
        elif line_item_type == "SavingsPlanCoveredUsage":
            row["savings_plan_savings_plan_a_r_n"] = sp_arn
            row["savings_plan_savings_plan_effective_cost"] = _money(rng, 60.0)
        elif line_item_type == "SavingsPlanNegation":
            row["savings_plan_savings_plan_a_r_n"] = sp_arn
            row["line_item_unblended_cost"] = "-" + cost
        elif line_item_type == "DiscountedUsage":
            row["reservation_reservation_a_r_n"] = ri_arn
            row["reservation_effective_cost"] = _money(rng, 50.0)
        elif line_item_type == "RIFee":
            row["reservation_reservation_a_r_n"] = ri_arn
            row["reservation_unused_amortized_upfront_fee_for_billing_period"] = _money(rng, 5.0)
            row["reservation_unused_recurring_fee"] = _money(rng, 5.0)
        elif line_item_type == "SavingsPlanRecurringFee":
            row["savings_plan_savings_plan_a_r_n"] = sp_arn
            row["savings_plan_total_commitment_to_date"] = "100"
            row["savings_plan_used_commitment"] = _money(rng, 100.0)
        yield row


def focus_rows(count: int, seed: int) -> Iterator[dict[str, str]]:
    rng = random.Random(seed)
    hours = _hour_pairs()
    resources = [f"i-{rng.getrandbits(64):016x}" for _ in range(2000)]
    for index in range(count):
        start, end = hours[index % len(hours)]
        resource_index = rng.randrange(len(resources))
        instance_type = _INSTANCE_TYPES[resource_index % len(_INSTANCE_TYPES)]
        region = _REGIONS[resource_index % len(_REGIONS)]
        team = _TEAMS[resource_index % len(_TEAMS)]
        committed = resource_index % 4 == 0
        billed = _money(rng, 98.0)
        yield {
            "BillingAccountId": _ACCOUNTS[0],
            "BillingCurrency": "USD",
            "BillingPeriodEnd": "2024-10-01T00:00:00Z",
            "BillingPeriodStart": "2024-09-01T00:00:00Z",
            "BilledCost": billed,
            "ChargeCategory": "Usage",
            "ChargeDescription": f"{instance_type} instance hour",
            "ChargePeriodEnd": end,
            "ChargePeriodStart": start,
            "CommitmentDiscountId": "sp-0123456789abcdef" if committed else "",
            "CommitmentDiscountStatus": "Used" if committed else "",
            "CommitmentDiscountType": "Savings Plan" if committed else "",
            "ConsumedQuantity": "1",
            "ConsumedUnit": "Hours",
            "ContractedCost": billed,
            "EffectiveCost": _money(rng, 60.0) if committed else billed,
            "ListCost": billed,
            "PricingCategory": "Committed" if committed else "Standard",
            "ProviderName": "AWS",
            "RegionId": region,
            "ResourceId": resources[resource_index],
            "ResourceName": f"node-{resource_index}",
            "ResourceType": "Virtual Machine",
            "ServiceCategory": "Compute",
            "ServiceName": "Amazon Elastic Compute Cloud",
            "SkuId": f"SKU{resource_index % 40:04d}",
            "SkuPriceDetails": f'{{"InstanceType":"{instance_type}"}}',
            "SubAccountId": _ACCOUNTS[resource_index % len(_ACCOUNTS)],
            "Tags": f'{{"team":"{team}"}}',
        }


def write_csv(
    path: Path, columns: tuple[str, ...], rows: Iterator[dict[str, str]], count: int
) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(",".join(columns) + "\n")
        lines: list[str] = []
        for row in rows:
            lines.append(",".join(_csv_cell(row[column]) for column in columns))
            if len(lines) >= 10_000:
                handle.write("\n".join(lines) + "\n")
                lines = []
        if lines:
            handle.write("\n".join(lines) + "\n")
