"""The GCP bill as a BigQuery detailed (resource-level) billing export, one JSON object a line,
derived from the demo's FOCUS rows.

What changes from FOCUS to BigQuery, as Google bills it:
- cost is gross; credits ride on the rows they reduce (`credits[].amount` negative), net cost is
  cost + credits. There is no amortised cost column.
- The committed use discount: covered A3 hours are billed at the on-demand price with a
  `COMMITTED_USAGE_DISCOUNT` credit of the same amount (net 0), and the commitment's fee is a
  `Commitment v1: ...` SKU charged every hour, on no resource. So the CUD's money sits on the
  fee rows (the demo maps them with a GPU-spend shared-cost rule), not on the nodes.
- The promotional credit is consumed by usage, hour by hour, as `PROMOTION` credits on the
  earliest node hours until it is spent.
- Spot hours have a `Spot Preemptible ...` SKU.
Over the month the file's net cost equals the FOCUS file's EffectiveCost total (`net_cost`).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from typing import Any

from finops.demo.fleet import HOUR, Month
from finops.demo.focus_catalogue import PROVIDERS, Row, money

Record = dict[str, Any]

_SERVICE_IDS = {
    "Compute Engine": "6F81-5844-456A",
    "Cloud Storage": "95FF-2EF5-5EA1",
    "Filestore": "D97E-AB26-5D95",
    "Networking": "E505-1604-58F8",
}
_PROJECT_NUMBERS = {"acme-ml-train": "418302957731", "acme-speech-prod": "902174665318"}
# Machine type -> (family, GPU) for SKU descriptions.
_MACHINES = {
    "a3-highgpu-8g": ("A3", "Nvidia H100 80GB"),
    "a2-highgpu-8g": ("A2", "Nvidia A100 40GB"),
}
_SKU_DESCRIPTIONS = {
    "Cloud Storage": "Standard Storage US Regional",
    "Filestore": "Filestore Zonal Capacity (SSD)",
    "Networking": "Network Internet Data Transfer Out from Americas to Americas",
}
_DECIMAL = re.compile(r'"__decimal__(-?[0-9.]+)"')


def _number(value: Decimal) -> str:
    """Marks a Decimal for `_dumps`, which writes it as a bare JSON number, digit for digit."""
    return f"__decimal__{money(value)}"


def _dumps(record: Record) -> str:
    return _DECIMAL.sub(r"\1", json.dumps(record, separators=(",", ":")))


def _bq_time(focus_time: str) -> str:
    # BigQuery's JSON export: "2025-10-01 00:00:00 UTC".
    return focus_time.replace("T", " ").replace("Z", " UTC")


def _labels(tags: str) -> list[dict[str, str]]:
    if not tags:
        return []
    return [{"key": k, "value": v} for k, v in sorted(json.loads(tags).items())]


def _sku_id(description: str) -> str:
    digest = sum(ord(c) * (i + 1) for i, c in enumerate(description)) % 16**12
    text = f"{digest:012X}"
    return f"{text[:4]}-{text[4:8]}-{text[8:]}"


class _Writer:
    def __init__(self, month: Month) -> None:
        self.spec = PROVIDERS["GCP"]
        self.month = month
        self.export_time = (month.end + timedelta(hours=30)).strftime("%Y-%m-%d %H:%M:%S UTC")
        self.records: list[Record] = []

    def base(self, focus: Row, service: str, sku: str) -> Record:
        project = focus["SubAccountId"]
        record: Record = {
            "billing_account_id": self.spec.billing_account_id,
            "service": {"id": _SERVICE_IDS[service], "description": service},
            "sku": {"id": _sku_id(sku), "description": sku},
            "usage_start_time": _bq_time(focus["ChargePeriodStart"]),
            "usage_end_time": _bq_time(focus["ChargePeriodEnd"]),
            "project": {
                "id": project,
                "number": _PROJECT_NUMBERS[project],
                "name": project,
                "labels": [{"key": "env", "value": "prod"}],
                "ancestry_numbers": f"/1029384756/{_PROJECT_NUMBERS[project]}/",
            },
            "labels": _labels(focus["Tags"]),
            "system_labels": [],
            "location": {
                "location": "us-central1",
                "country": "US",
                "region": "us-central1",
                "zone": None,
            },
            "resource": {"name": None, "global_name": None},
            "export_time": self.export_time,
            "cost": _number(Decimal(focus["BilledCost"])),
            "currency": "USD",
            "currency_conversion_rate": 1,
            "usage": {
                "amount": None,
                "unit": None,
                "amount_in_pricing_units": None,
                "pricing_unit": None,
            },
            "credits": [],
            "invoice": {"month": self.month.label.replace("-", "")},
            "cost_type": "regular",
            "adjustment_info": None,
            "cost_at_list": None,
        }
        self.records.append(record)
        return record


def _node_sku(focus: Row) -> str:
    family, gpu = _MACHINES[focus["x_InstanceType"]]
    spot = "Spot Preemptible " if focus["PricingCategory"] == "Dynamic" else ""
    return f"{spot}{family} Instance with {gpu} GPUs running in Americas"


def _node(writer: _Writer, focus: Row) -> Record:
    covered = focus["CommitmentDiscountStatus"] == "Used"
    record = writer.base(focus, "Compute Engine", _node_sku(focus))
    gross = Decimal(focus["ListCost"] if covered else focus["BilledCost"])
    record["cost"] = _number(gross)
    record["cost_at_list"] = _number(Decimal(focus["ListCost"]))
    record["location"]["zone"] = focus["AvailabilityZone"]
    record["resource"] = {"name": focus["ResourceName"], "global_name": focus["ResourceId"]}
    record["system_labels"] = [
        {"key": "compute.googleapis.com/machine_spec", "value": focus["x_InstanceType"]},
        {"key": "compute.googleapis.com/memory", "value": "1921024"},
        {"key": "compute.googleapis.com/cores", "value": "208"},
    ]
    record["usage"] = {
        "amount": 3600,
        "unit": "seconds",
        "amount_in_pricing_units": 1,
        "pricing_unit": "hour",
    }
    if covered:
        family, gpu = _MACHINES[focus["x_InstanceType"]]
        record["credits"].append(
            {
                "name": f"Committed use discount: {family} {gpu} GPUs in Americas",
                "amount": _number(-gross),
                "full_name": None,
                "id": "",
                "type": "COMMITTED_USAGE_DISCOUNT",
            }
        )
    return record


def _commitment_fees(writer: _Writer, purchase: Row, hours: int) -> None:
    hourly = Decimal(purchase["BilledCost"]) / hours
    assert hourly * hours == Decimal(purchase["BilledCost"])
    family = "A3"
    sku = f"Commitment v1: {family} Nvidia H100 80GB GPUs in Americas for 1 Year"
    for hour in range(hours):
        start = writer.month.start + timedelta(seconds=hour * HOUR)
        focus = dict(purchase)
        focus["ChargePeriodStart"] = start.strftime("%Y-%m-%dT%H:%M:%SZ")
        focus["ChargePeriodEnd"] = (start + timedelta(seconds=HOUR)).strftime("%Y-%m-%dT%H:%M:%SZ")
        focus["BilledCost"] = money(hourly)
        record = writer.base(focus, "Compute Engine", sku)
        record["cost_at_list"] = record["cost"]
        record["usage"] = {
            "amount": 3600,
            "unit": "seconds",
            "amount_in_pricing_units": 1,
            "pricing_unit": "hour",
        }


def _daily(writer: _Writer, focus: Row) -> None:
    service = focus["ServiceName"]
    record = writer.base(focus, service, _SKU_DESCRIPTIONS[service])
    record["cost_at_list"] = _number(Decimal(focus["ListCost"]))
    if focus["ResourceName"]:
        record["resource"] = {"name": focus["ResourceName"], "global_name": focus["ResourceId"]}
    record["usage"] = {
        "amount": _number(Decimal(focus["ConsumedQuantity"])),
        "unit": "gibibyte month" if focus["ConsumedUnit"] == "GiBy.mo" else "gibibyte",
        "amount_in_pricing_units": _number(Decimal(focus["ConsumedQuantity"])),
        "pricing_unit": focus["ConsumedUnit"],
    }


def _spend_promotion(records: list[Record], credit: Decimal, name: str) -> None:
    """Consume a (negative) promotional credit on the earliest node hours, as GCP applies it."""
    remaining = -credit
    nodes = [r for r in records if r["resource"]["name"] and r["system_labels"]]
    nodes.sort(key=lambda r: (r["usage_start_time"], r["resource"]["name"]))
    for record in nodes:
        if remaining <= 0:
            break
        net = Decimal(record["cost"].removeprefix("__decimal__")) + sum(
            (Decimal(c["amount"].removeprefix("__decimal__")) for c in record["credits"]),
            Decimal(0),
        )
        take = min(net, remaining)
        if take <= 0:
            continue
        record["credits"].append(
            {
                "name": name,
                "amount": _number(-take),
                "full_name": None,
                "id": "promotions/ai-startup-2025",
                "type": "PROMOTION",
            }
        )
        remaining -= take
    assert remaining == 0, f"promotion not spent: {remaining}"


def bigquery_records(*, focus_rows: list[Row], month: Month) -> list[Record]:
    """The BigQuery export records of the GCP bill whose FOCUS rows are `focus_rows`."""
    writer = _Writer(month)
    promotion: Row | None = None
    for focus in focus_rows:
        if focus["x_InstanceType"]:
            _node(writer, focus)
        elif focus["ChargeCategory"] == "Purchase" and focus["CommitmentDiscountId"]:
            _commitment_fees(writer, focus, month.days * 24)
        elif focus["CommitmentDiscountStatus"] == "Unused":
            continue  # the hourly fee already bills unused commitment
        elif focus["ChargeCategory"] == "Credit":
            promotion = focus
        else:
            _daily(writer, focus)
    if promotion is not None:
        _spend_promotion(
            writer.records, Decimal(promotion["BilledCost"]), promotion["ChargeDescription"]
        )
    writer.records.sort(key=lambda r: (r["usage_start_time"], r["sku"]["description"]))
    return writer.records


def jsonl_bytes(records: list[Record]) -> bytes:
    return "".join(_dumps(record) + "\n" for record in records).encode("utf-8")


def net_cost(record: Record) -> Decimal:
    """cost + credits of one record as read back from the file (numbers parsed as Decimal)."""
    credits = sum((Decimal(str(c["amount"])) for c in record["credits"]), Decimal(0))
    return Decimal(str(record["cost"])) + credits


def by_resource_hour(records: list[Record]) -> dict[tuple[str, str], int]:
    """How many records each (resource, hour) has: one per node hour (tests)."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for record in records:
        if record["resource"]["name"]:
            counts[(record["resource"]["name"], record["usage_start_time"])] += 1
    return counts
