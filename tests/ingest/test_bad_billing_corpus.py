"""A corpus of bad billing files, for every format ``ingest_billing`` accepts and the variants its
parsers sniff, each fed to the real command after a good import of the same source and month.

Every bad file must fail its own import batch with one message naming the file, the row and the
column (where the defect has them), store nothing, and leave the earlier good data exactly as it
was (row count, EffectiveCost sum, batch ids). The few inputs that are not errors (a UTF-8 byte
order mark, a lower-case currency code, a column a format documents as optional, more decimal
places than the ledger keeps) must import with totals computed here from the file.

Rows are numbered as a user finds them: in CSV the header is row 1 and the first data row is
row 2; in Parquet, JSON lines and OpenCost JSON, row N is the N-th record. A problem with the
header itself (a missing or duplicated column) names the column, and row 1 in a CSV file.
Parsers are run with 2-row chunks so that rows before a bad one are already loaded when it fails.

Choices: a file with a header and no data rows is an error ("no data rows"), for every format;
a lower-case currency code is normalised (``usd`` -> USD); a code that is not in ISO 4217
(``XYZ``) or is blank is an error; a charge period may be empty (end = start) but not end
before it starts; a row with a NUL or a byte that is not UTF-8 is an error naming its cell (a
BOM is fine); a column the parser reads appearing twice in the header is an error. Documented
leniencies stay: a FOCUS file without BillingCurrency, a CUR without its currency code column,
and any format without its usage account column import (the default currency, no account);
a short CUR row is padded with empty cells. A FOCUS file under --format azure or coreweave
imports only if its ProviderName is that provider's (else: use --format focus).
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import json
import random
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CoreWeaveRate, CostLineItem, ImportBatch
from billing_ingest.parsers import BILLING_PARSERS, billing_parser
from finops.core.money import MONEY_QUANTUM
from tests.builders import LEGACY_FROM_CUR2

pytestmark = pytest.mark.django_db

SOURCE = "corpus"
ROWS = 4  # data rows in a good file
BAD = 2  # 0-based index of the defective data row: earlier rows are a loaded chunk
H100 = "gd-8xh100ib-i128"
CW_RATE = Decimal("2.5")
ANY = "*"

# --------------------------------------------------------------------------- good rows per shape


def _start(i: int) -> datetime:
    return datetime(2024, 9, 2, tzinfo=UTC) + timedelta(hours=i)


def _iso(moment: datetime, fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    return moment.strftime(fmt)


def _cost(i: int) -> str:
    return f"{i + 1}.{(i * 37) % 100:02d}"


def _money(text: str) -> Decimal:
    return Decimal(text).quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN)


def focus_row(i: int) -> dict[str, str]:
    return {
        "BillingAccountId": "111122223333",
        "SubAccountId": "444455556666",
        "ProviderName": "AWS",
        "BillingPeriodStart": "2024-09-01T00:00:00Z",
        "BillingPeriodEnd": "2024-10-01T00:00:00Z",
        "ChargePeriodStart": _iso(_start(i)),
        "ChargePeriodEnd": _iso(_start(i + 1)),
        "ChargeCategory": "Usage",
        "ServiceName": "Amazon Elastic Compute Cloud",
        "SkuId": "SKU-P5",
        "ResourceId": f"i-{i:08x}",
        "ResourceName": f"gpu-node-{i}",
        "BilledCost": _cost(i),
        "EffectiveCost": _cost(i),
        "BillingCurrency": "USD",
        "Tags": '{"team": "vision"}',
    }


def focus_aws_row(i: int) -> dict[str, str]:
    """AWS Data Exports' FOCUS 1.0 export: FOCUS columns plus AWS's x_ columns."""
    fmt = "%Y-%m-%dT%H:%M:%S.000Z"
    return {
        "AvailabilityZone": "use1-az1",
        "BilledCost": _cost(i),
        "BillingAccountId": "111122223333",
        "BillingAccountName": "payer",
        "BillingCurrency": "USD",
        "BillingPeriodEnd": "2024-10-01T00:00:00.000Z",
        "BillingPeriodStart": "2024-09-01T00:00:00.000Z",
        "ChargeCategory": "Usage",
        "ChargeClass": "",
        "ChargeDescription": "$98.32 per On Demand Linux p5.48xlarge Instance Hour",
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodEnd": _iso(_start(i + 1), fmt),
        "ChargePeriodStart": _iso(_start(i), fmt),
        "CommitmentDiscountId": "",
        "ConsumedQuantity": "1",
        "ConsumedUnit": "Hours",
        "ContractedCost": _cost(i),
        "EffectiveCost": _cost(i),
        "ListCost": _cost(i),
        "PricingCategory": "Standard",
        "ProviderName": "AWS",
        "PublisherName": "Amazon Web Services, Inc.",
        "RegionId": "us-east-1",
        "ResourceId": f"arn:aws:ec2:us-east-1:444455556666:instance/i-{i:08x}",
        "ResourceName": f"gpu-node-{i}",
        "ServiceCategory": "Compute",
        "ServiceName": "Amazon Elastic Compute Cloud",
        "SkuId": "SKU-P5",
        "SubAccountId": "444455556666",
        "Tags": '{"user:team": "vision"}',
        "x_Operation": "RunInstances",
        "x_ServiceCode": "AmazonEC2",
        "x_UsageType": "USE1-BoxUsage:p5.48xlarge",
    }


def azure_focuscost_row(i: int) -> dict[str, str]:
    return {
        "BilledCost": _cost(i),
        "BillingAccountId": "/providers/Microsoft.Billing/billingAccounts/8611537",
        "BillingCurrency": "USD",
        "BillingPeriodStart": "2024-09-01T00:00:00Z",
        "BillingPeriodEnd": "2024-10-01T00:00:00Z",
        "ChargeCategory": "Usage",
        "ChargePeriodStart": _iso(_start(i)),
        "ChargePeriodEnd": _iso(_start(i + 1)),
        "EffectiveCost": _cost(i),
        "ProviderName": "Microsoft",
        "ResourceId": f"/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Compute/"
        f"virtualMachines/gpu-{i}",
        "ResourceName": f"gpu-{i}",
        "SubAccountId": "/subscriptions/sub-1",
        "x_SkuMeterCategory": "Virtual Machines",
    }


def cur2_row(i: int) -> dict[str, str]:
    fmt = "%Y-%m-%dT%H:%M:%S.000Z"
    return {
        "identity_line_item_id": f"li-{i}",
        "bill_billing_period_start_date": "2024-09-01T00:00:00.000Z",
        "bill_billing_period_end_date": "2024-10-01T00:00:00.000Z",
        "bill_payer_account_id": "111122223333",
        "line_item_usage_account_id": "444455556666",
        "line_item_line_item_type": "Usage",
        "line_item_usage_start_date": _iso(_start(i), fmt),
        "line_item_usage_end_date": _iso(_start(i + 1), fmt),
        "line_item_product_code": "AmazonEC2",
        "line_item_usage_type": "USE1-BoxUsage:p5.48xlarge",
        "line_item_resource_id": f"i-{i:08x}",
        "line_item_usage_amount": "1.0",
        "line_item_currency_code": "USD",
        "line_item_unblended_cost": _cost(i),
        "pricing_unit": "Hrs",
        "pricing_public_on_demand_cost": _cost(i),
        "product": '{"product_name": "Amazon Elastic Compute Cloud"}',
        "product_instance_type": "p5.48xlarge",
        "resource_tags": '{"user_team": "vision"}',
    }


def cur_legacy_row(i: int) -> dict[str, str]:
    cur2 = cur2_row(i)
    # The legacy names of the columns this smaller row has.
    row = {legacy: cur2[snake] for snake, legacy in LEGACY_FROM_CUR2.items() if snake in cur2}
    row["lineItem/UsageStartDate"] = _iso(_start(i))
    row["lineItem/UsageEndDate"] = _iso(_start(i + 1))
    row["product/ProductName"] = "Amazon Elastic Compute Cloud"
    row["resourceTags/user:team"] = "vision"
    return row


def gcp_row(i: int) -> dict[str, str]:
    """The BigQuery export flattened to dotted names (its CSV form); JSON lines and Parquet
    nest it again."""
    fmt = "%Y-%m-%d %H:%M:%S+00:00"
    return {
        "billing_account_id": "0000AA-BBBBBB-CCCCCC",
        "service.id": "6F81-5844-456A",
        "service.description": "Compute Engine",
        "sku.id": "SKU-A3",
        "sku.description": "A3 Instance Core running in Americas",
        "usage_start_time": _iso(_start(i), fmt),
        "usage_end_time": _iso(_start(i + 1), fmt),
        "project.id": "ml-prod",
        "labels": '[{"key": "team", "value": "vision"}]',
        "location.region": "us-central1",
        "cost": _cost(i),
        "currency": "USD",
        "usage.amount": "3600",
        "usage.unit": "seconds",
        "credits": "[]",
        "invoice.month": "202409",
        "cost_type": "regular",
        "resource.name": f"gke-a3-node-{i}",
    }


def azure_ea_row(i: int) -> dict[str, str]:
    return {
        "BillingAccountId": "8611537",
        "BillingPeriodStartDate": "09/01/2024",
        "BillingPeriodEndDate": "09/30/2024",
        "SubscriptionId": "sub-1",
        "Date": f"09/{2 + i % 27:02d}/2024",
        "MeterId": "meter-1",
        "MeterCategory": "Virtual Machines",
        "MeterName": "ND96isr H100 v5",
        "Quantity": "24",
        "Cost": _cost(i),
        "BillingCurrency": "USD",
        "ResourceLocation": "East US",
        "ResourceId": f"/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Compute/"
        f"virtualMachines/gpu-{i}",
        "ResourceName": f"gpu-{i}",
        "Tags": '"team": "vision"',
        "UnitOfMeasure": "1 Hour",
        "ChargeType": "Usage",
        "PricingModel": "OnDemand",
    }


def azure_mca_row(i: int) -> dict[str, str]:
    return {
        "billingAccountId": "mca-acct",
        "billingPeriodStartDate": "2024-09-01",
        "billingPeriodEndDate": "2024-09-30",
        "subscriptionId": "sub-2",
        "date": f"2024-09-{2 + i % 27:02d}",
        "meterCategory": "Virtual Machines",
        "meterName": "NC24ads A100 v4",
        "meterId": "meter-2",
        "quantity": "24",
        "costInBillingCurrency": _cost(i),
        "billingCurrency": "USD",
        "resourceLocation": "westeurope",
        "ResourceId": f"/subscriptions/sub-2/resourceGroups/rg/providers/Microsoft.Compute/"
        f"virtualMachines/gpu-{i}",
        "resourceName": f"gpu-{i}",
        "tags": '"team": "speech"',
        "chargeType": "Usage",
        "pricingModel": "OnDemand",
    }


def cw_usage_row(i: int) -> dict[str, str]:
    return {
        "ProviderName": "CoreWeave",
        "BillingAccountId": "acme-ai",
        "BillingPeriodStart": "2024-09-01T00:00:00Z",
        "BillingPeriodEnd": "2024-10-01T00:00:00Z",
        "ChargePeriodStart": _iso(_start(i)),
        "ChargePeriodEnd": _iso(_start(i + 1)),
        "ChargeCategory": "Usage",
        "PricingCategory": "Standard",
        "ConsumedQuantity": f"{i % 7 + 1}.5",
        "ConsumedUnit": "Hours",
        "ResourceId": f"coreweave:us-east-04:node/{i:06x}",
        "ResourceName": f"g8h100-node-{i}",
        "SkuId": H100,
        "x_InstanceType": H100,
        "SubAccountId": "tenant-acme-training",
        "Tags": '{"team": "vision"}',
        "BilledCost": "",
        "EffectiveCost": "",
    }


def cw_invoice_row(i: int) -> dict[str, str]:
    return {
        "invoice_month": "2024-09",
        "namespace": f"tenant-{i}",
        "instance_type": H100,
        "pricing_category": "Standard",
        "quantity": "720",
        "unit": "Hours",
        "rate": "2.5",
        "amount": _cost(i),
        "currency": "USD",
    }


def opencost_row(i: int) -> dict[str, str]:
    """One /cloudCost item, flattened to dotted names (the JSON writer nests it)."""
    start = datetime(2024, 9, 2, tzinfo=UTC) + timedelta(days=i % 27)
    row = {
        "properties.provider": "AWS",
        "properties.accountID": "444455556666",
        "properties.service": "AmazonEC2",
        "properties.providerID": f"i-{i:08x}",
        "window.start": _iso(start),
        "window.end": _iso(start + timedelta(days=1)),
    }
    for block in ("listCost", "netCost", "amortizedNetCost", "invoicedCost"):
        row[f"{block}.cost"] = _cost(i)
    return row


def _cw_effective(row: dict[str, str]) -> Decimal:
    # The quantity is stored (and priced) at the ledger's 12 places; the product rounds once.
    return _money(str(_money(row["ConsumedQuantity"]) * CW_RATE))


@dataclass(frozen=True)
class Shape:
    """One file layout: its good rows, the format that reads it, and which column plays which
    role (cost, currency, start, end, period, account, text) in the defects below."""

    name: str
    format: str
    make: Callable[[int], dict[str, str]]
    roles: dict[str, str]
    # How the import computes EffectiveCost from a row (default: the cost column).
    effective: Callable[[dict[str, str]], Decimal] | None = None
    # Roles whose column a file may lack (documented defaults), as (role -> why).
    optional: dict[str, str] = field(default_factory=dict)
    # The column a missing-column error names, where it differs from the role's column.
    missing_names: dict[str, str] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return list(self.make(0))

    def effective_of(self, row: dict[str, str]) -> Decimal:
        if self.effective is not None:
            return self.effective(row)
        return _money(row[self.roles["cost"]])


FOCUS_ROLES = {
    "cost": "EffectiveCost",
    "currency": "BillingCurrency",
    "start": "ChargePeriodStart",
    "end": "ChargePeriodEnd",
    "period": "BillingPeriodStart",
    "account": "SubAccountId",
    "text": "ResourceName",
}
FOCUS_OPTIONAL = {
    "currency": "FOCUS files without BillingCurrency take FINOPS_DEFAULT_CURRENCY",
    "account": "SubAccountId is optional in FOCUS (the spec's examples have none)",
}
CUR_OPTIONAL = {
    "currency": "a CUR without line_item_currency_code is in FINOPS_DEFAULT_CURRENCY",
    "account": "the usage account is informational (attribution falls back to tags)",
}
AZURE_MISSING = {
    "cost": "CostInBillingCurrency",
    "currency": "BillingCurrency",
    "start": "Date",
    "period": "BillingPeriodStartDate",
}

SHAPES = {
    shape.name: shape
    for shape in (
        Shape("focus", "focus", focus_row, FOCUS_ROLES, optional=FOCUS_OPTIONAL),
        Shape("focus-aws", "focus", focus_aws_row, FOCUS_ROLES, optional=FOCUS_OPTIONAL),
        Shape(
            "cur2",
            "aws-cur",
            cur2_row,
            {
                "cost": "line_item_unblended_cost",
                "currency": "line_item_currency_code",
                "start": "line_item_usage_start_date",
                "end": "line_item_usage_end_date",
                "period": "bill_billing_period_start_date",
                "account": "line_item_usage_account_id",
                "text": "line_item_resource_id",
            },
            optional=CUR_OPTIONAL,
        ),
        Shape(
            "cur-legacy",
            "aws-cur",
            cur_legacy_row,
            {
                "cost": "lineItem/UnblendedCost",
                "currency": "lineItem/CurrencyCode",
                "start": "lineItem/UsageStartDate",
                "end": "lineItem/UsageEndDate",
                "period": "bill/BillingPeriodStartDate",
                "account": "lineItem/UsageAccountId",
                "text": "lineItem/ResourceId",
            },
            optional=CUR_OPTIONAL,
        ),
        Shape(
            "gcp",
            "gcp-bigquery",
            gcp_row,
            {
                "cost": "cost",
                "currency": "currency",
                "start": "usage_start_time",
                "end": "usage_end_time",
                "period": "invoice.month",
                "account": "project.id",
                "text": "resource.name",
            },
            optional={"account": "project.id is informational"},
        ),
        Shape(
            "azure-ea",
            "azure",
            azure_ea_row,
            {
                "cost": "Cost",
                "currency": "BillingCurrency",
                "start": "Date",
                "period": "BillingPeriodStartDate",
                "account": "SubscriptionId",
                "text": "ResourceName",
            },
            optional={
                "account": "SubscriptionId is informational",
                # Legacy usage exports have none: the period follows the usage date.
                "period": "the billing period follows the usage date",
            },
            missing_names=AZURE_MISSING,
        ),
        Shape(
            "azure-mca",
            "azure",
            azure_mca_row,
            {
                "cost": "costInBillingCurrency",
                "currency": "billingCurrency",
                "start": "date",
                "period": "billingPeriodStartDate",
                "account": "subscriptionId",
                "text": "resourceName",
            },
            optional={
                "account": "subscriptionId is informational",
                # Legacy usage exports have none: the period follows the usage date.
                "period": "the billing period follows the usage date",
            },
            missing_names=AZURE_MISSING,
        ),
        Shape(
            "azure-focuscost",
            "azure",
            azure_focuscost_row,
            FOCUS_ROLES,
            optional=FOCUS_OPTIONAL,
        ),
        Shape(
            "cw-usage",
            "coreweave",
            cw_usage_row,
            {
                "cost": "ConsumedQuantity",
                "start": "ChargePeriodStart",
                "end": "ChargePeriodEnd",
                "period": "BillingPeriodStart",
                "account": "SubAccountId",
                "text": "ResourceName",
            },
            effective=_cw_effective,
            optional={"account": "SubAccountId is optional in FOCUS"},
        ),
        Shape(
            "cw-invoice",
            "coreweave-invoice",
            cw_invoice_row,
            {
                "cost": "amount",
                "currency": "currency",
                "period": "invoice_month",
                "account": "namespace",
                "text": "namespace",
            },
        ),
        Shape(
            "opencost",
            "opencost-cloudcost",
            opencost_row,
            {
                "cost": "amortizedNetCost.cost",
                "start": "window.start",
                "end": "window.end",
                "account": "properties.accountID",
            },
            optional={"account": "properties are informational"},
        ),
    )
}


# --------------------------------------------------------------------------- encoders

SUFFIX = {
    "csv": ".csv",
    "csv.gz": ".csv.gz",
    "zip": ".zip",
    "parquet": ".parquet",
    "jsonl": ".jsonl",
    "jsonl.gz": ".jsonl.gz",
    "json": ".json",
}
MONEY_COLUMNS = {
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "ConsumedQuantity",
    "line_item_unblended_cost",
    "pricing_public_on_demand_cost",
    "line_item_usage_amount",
    "Cost",
    "costInBillingCurrency",
    "Quantity",
    "quantity",
    "cost",
    "usage.amount",
    "listCost.cost",
    "netCost.cost",
    "amortizedNetCost.cost",
    "invoicedCost.cost",
}
TIMESTAMP_COLUMNS = {
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "bill_billing_period_start_date",
    "bill_billing_period_end_date",
    "line_item_usage_start_date",
    "line_item_usage_end_date",
    "usage_start_time",
    "usage_end_time",
}
MAP_COLUMNS = {"product", "resource_tags"}  # CUR 2.0 Parquet: map<string, string>
JSON_COLUMNS = {"labels", "credits"}  # BigQuery: repeated records
_JSON_NUMBER_RE = re.compile(r"^(-?\d+(\.\d+)?([eE][+-]?\d+)?|NaN|-?Infinity)$")


@dataclass(frozen=True)
class RawNumber:
    """A JSON number written exactly as its text (JSON lines and OpenCost keep digits)."""

    text: str


def _json_text(value: Any) -> str:
    if isinstance(value, RawNumber):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        *parents, leaf = name.split(".")
        target = nested
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return nested


def _timestamp(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _typed(name: str, values: list[str]) -> tuple[list[Any], Any]:
    """A column's values as a typed export writes them (doubles, timestamps, maps, records),
    or as text when any value cannot be (so a bad value reaches the parser as it is)."""
    try:
        if name in MONEY_COLUMNS:
            return [float(v) if v != "" else None for v in values], pa.float64()
        if name in TIMESTAMP_COLUMNS:
            return [_timestamp(v) if v else None for v in values], pa.timestamp("us", tz="UTC")
        if name in MAP_COLUMNS:
            maps = [list(json.loads(v).items()) if v else None for v in values]
            return maps, pa.map_(pa.string(), pa.string())
        if name in JSON_COLUMNS:
            return [json.loads(v) if v else None for v in values], None
    except ValueError:
        pass
    return values, pa.string()


def _columns(header: list[str], rows: list[list[str]]) -> dict[str, tuple[list[Any], Any]]:
    return {name: _typed(name, [row[k] for row in rows]) for k, name in enumerate(header)}


def encode_csv(
    header: list[str], rows: list[list[str]], *, bom: bool = False, encoding: str = "utf-8"
) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return (("\ufeff" if bom else "") + out.getvalue()).encode(encoding)


def encode_parquet(header: list[str], rows: list[list[str]], *, nested: bool) -> bytes:
    typed = _columns(header, rows)
    if nested and rows:  # BigQuery: records nested by the dotted names
        records = [_nest({name: typed[name][0][r] for name in header}) for r in range(len(rows))]
        table = pa.Table.from_pylist(records)
    else:
        table = pa.table(
            {
                name: pa.array(values, type=kind) if kind is not None else pa.array(values)
                for name, (values, kind) in typed.items()
            }
        )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=2)
    return sink.getvalue()


def _json_value(name: str, text: str) -> Any:
    if name in MONEY_COLUMNS and _JSON_NUMBER_RE.match(text):
        return RawNumber(text)
    if name in JSON_COLUMNS:
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _record(header: list[str], row: list[str]) -> dict[str, Any]:
    return _nest({name: _json_value(name, cell) for name, cell in zip(header, row, strict=True)})


def encode_jsonl(header: list[str], rows: list[list[str]], *, bom: bool = False) -> str:
    lines = [_json_text(_record(header, row)) for row in rows]
    return ("\ufeff" if bom else "") + "".join(line + "\n" for line in lines)


def encode_opencost(header: list[str], rows: list[list[str]]) -> str:
    items = {f"item-{r}": _record(header, row) for r, row in enumerate(rows)}
    return _json_text({"code": 200, "data": {"sets": [{"cloudCosts": items}]}})


@dataclass(frozen=True)
class Variant:
    shape: Shape
    container: str

    @property
    def id(self) -> str:
        return f"{self.shape.name}-{self.container}"

    @property
    def suffix(self) -> str:
        return SUFFIX[self.container]

    @property
    def per_record(self) -> bool:
        """Rows are records (no header row): Parquet, JSON lines, OpenCost JSON."""
        return self.container in ("parquet", "jsonl", "jsonl.gz", "json")

    def row_number(self, index: int) -> int:
        return index + 1 if self.per_record else index + 2

    def encode(
        self,
        header: list[str],
        rows: list[list[str]],
        *,
        bom: bool = False,
        encoding: str = "utf-8",
    ) -> bytes:
        kind = self.container
        if kind == "parquet":
            return encode_parquet(header, rows, nested=self.shape.name == "gcp")
        if kind in ("jsonl", "jsonl.gz"):
            data = encode_jsonl(header, rows, bom=bom).encode(encoding)
        elif kind == "json":
            data = encode_opencost(header, rows).encode(encoding)
        else:
            data = encode_csv(header, rows, bom=bom, encoding=encoding)
        if kind.endswith(".gz"):
            return gzip.compress(data, mtime=0)
        if kind == "zip":
            sink = io.BytesIO()
            with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
                archive.writestr("report-1.csv", data)
            return sink.getvalue()
        return data


VARIANTS = [
    Variant(SHAPES[shape], container)
    for shape, containers in (
        ("focus", ("csv", "csv.gz", "parquet")),
        ("focus-aws", ("csv",)),
        ("cur2", ("csv", "csv.gz", "parquet")),
        ("cur-legacy", ("csv", "zip")),
        ("gcp", ("jsonl", "csv", "parquet", "jsonl.gz")),
        ("azure-ea", ("csv", "csv.gz", "parquet")),
        ("azure-mca", ("csv",)),
        ("azure-focuscost", ("csv",)),
        ("cw-usage", ("csv", "parquet")),
        ("cw-invoice", ("csv", "csv.gz")),
        ("opencost", ("json",)),
    )
    for container in containers
]
# The first variant of each shape is its plain form: defects of the header or of one cell are
# tried there (and in Parquet / JSON lines), not again inside every compression.
PLAIN = {v.shape.name: v for v in reversed(VARIANTS)}
PRIMARY_FOR_FORMAT = {
    "focus": PLAIN["focus"],
    "aws-cur": PLAIN["cur2"],
    "gcp-bigquery": PLAIN["gcp"],
    "azure": PLAIN["azure-ea"],
    "coreweave": PLAIN["cw-usage"],
    "coreweave-invoice": PLAIN["cw-invoice"],
    "opencost-cloudcost": PLAIN["opencost"],
}


def table(shape: Shape, count: int = ROWS) -> tuple[list[str], list[list[str]]]:
    header = shape.columns
    return header, [[shape.make(i)[name] for name in header] for i in range(count)]


def as_dicts(header: list[str], rows: list[list[str]]) -> list[dict[str, str]]:
    return [dict(zip(header, row, strict=True)) for row in rows]


# --------------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Fail:
    """The import fails: the message names the file, this row and column (None: names none;
    ANY: not checked) and contains one of the phrases (case-insensitive)."""

    row: int | str | None = ANY
    column: str | None = ANY
    phrases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Accept:
    """The import succeeds with these data rows (totals computed from them here)."""

    rows: list[dict[str, str]]
    currency: str = "USD"


@dataclass(frozen=True)
class Case:
    id: str
    variant: Variant
    name: str
    data: bytes
    expect: Fail | Accept
    format: str = ""  # --format, default the variant's own

    @property
    def format_name(self) -> str:
        return self.format or self.variant.shape.format


def _case(variant: Variant, defect: str, data: bytes, expect: Fail | Accept, **kw: Any) -> Case:
    suffix = kw.pop("suffix", variant.suffix)
    return Case(f"{variant.id}-{defect}", variant, f"bad-{defect}{suffix}", data, expect, **kw)


def _noise(size: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(size)


def _text_container(variant: Variant) -> bool:
    return variant.container in ("csv", "jsonl", "json")


# --------------------------------------------------------------------------- defects


def container_defects(v: Variant) -> list[Case]:
    cases = [_case(v, "empty", b"", Fail(None, None, ("empty", "no data", "cannot read")))]
    if _text_container(v):
        header, rows = table(v.shape, 400)
        whole = gzip.compress(v.encode(header, rows), mtime=0)
        gz = ".jsonl.gz" if v.container == "jsonl" else v.suffix + ".gz"
        cases += [
            _case(v, "truncated-gzip", whole[: len(whole) // 2], Fail(ANY, None), suffix=gz),
            _case(v, "gzip-of-garbage", gzip.compress(_noise(5000), mtime=0), Fail(), suffix=gz),
            _case(v, "corrupt-gzip", b"\x1f\x8b\x08\x00" + _noise(3000), Fail(), suffix=gz),
            _case(
                v,
                "not-parquet",
                b"this is not a Parquet file\n" + _noise(200),
                Fail(),
                suffix=".parquet",
            ),
        ]
    if v.container == "zip":
        header, rows = table(v.shape, 400)
        whole = v.encode(header, rows)
        cases.append(_case(v, "truncated-zip", whole[: len(whole) // 2], Fail()))
    if v.container == "parquet":
        header, rows = table(v.shape, 60)
        whole = v.encode(header, rows)
        cases.append(_case(v, "truncated-parquet", whole[: len(whole) * 2 // 3], Fail()))
    header, _ = table(v.shape)
    if v.container in ("csv", "csv.gz", "zip", "parquet"):
        no_rows = v.encode(header, [])
        cases.append(_case(v, "header-only", no_rows, Fail(None, None, ("no data rows",))))
    if v.container == "json":
        empty_sets = v.encode(header, [])
        cases.append(_case(v, "no-items", empty_sets, Fail(None, None, ("no cloud cost items",))))
    return cases


def missing_column_defects(v: Variant) -> list[Case]:
    if v.container not in ("csv", "parquet", "jsonl", "json"):
        return []
    shape = v.shape
    cases = []
    for role in ("cost", "currency", "start", "period", "account"):
        column = shape.roles.get(role)
        if column is None:
            continue
        header, rows = table(shape)
        keep = [k for k, name in enumerate(header) if name != column]
        data = v.encode([header[k] for k in keep], [[row[k] for k in keep] for row in rows])
        expect: Fail | Accept
        if role in shape.optional:
            # Imports without it; the expected costs come from the rows' other columns.
            expect = Accept(as_dicts(header, rows))
        elif shape.name == "cw-usage" and role == "cost":
            # Not a header error: a priced row (BilledCost and EffectiveCost set) needs none.
            expect = Fail(v.row_number(0), column, ("ConsumedQuantity",))
        elif v.per_record and v.container != "parquet":
            expect = Fail(1, column, ("missing",))
        else:
            named = shape.missing_names.get(role, column)
            expect = Fail(None if v.per_record else 1, named, ("missing", column.lower()))
        cases.append(_case(v, f"missing-{role}", data, expect))
    return cases


def _with_cell(v: Variant, column: str, value: str, **encode: Any) -> tuple[bytes, list]:
    header, rows = table(v.shape)
    rows[BAD][header.index(column)] = value
    return v.encode(header, rows, **encode), as_dicts(header, rows)


# value -> (name in the file name, phrases one of which the message holds)
BAD_NUMBERS = {
    "12,50": ("comma", ("not a number",)),
    "abc": ("abc", ("not a number",)),
    "NaN": ("nan", ("not a finite number",)),
    "Infinity": ("infinity", ("not a finite number",)),
    "1e400": ("1e400", ("out of range", "not a finite number")),
}


def value_defects(v: Variant) -> list[Case]:
    shape = v.shape
    row = v.row_number(BAD)
    cases = []
    cost = shape.roles["cost"]
    for value, (slug, phrases) in BAD_NUMBERS.items():
        data, _ = _with_cell(v, cost, value)
        cases.append(_case(v, f"cost-{slug}", data, Fail(row, cost, phrases)))
    if v.container not in ("csv", "parquet", "jsonl", "json"):
        return cases
    currency = shape.roles.get("currency")
    if currency is not None:
        data, _ = _with_cell(v, currency, "XYZ")
        cases.append(_case(v, "currency-XYZ", data, Fail(row, currency, ("ISO 4217",))))
        data, _ = _with_cell(v, currency, "")
        cases.append(_case(v, "currency-blank", data, Fail(row, currency, ("empty", "ISO 4217"))))
        data, good = _with_cell(v, currency, "usd")
        cases.append(_case(v, "currency-lowercase", data, Accept(good)))
    start = shape.roles.get("start") or shape.roles["period"]
    nonsense = {"azure-ea": "13/45/2024", "cw-invoice": "2024-13"}.get(
        shape.name, "2024-13-45T00:00:00Z"
    )
    data, _ = _with_cell(v, start, nonsense)
    unparsable = Fail(row, start, ("timestamp", "date", "month"))
    cases.append(_case(v, "date-unparsable", data, unparsable))
    end = shape.roles.get("end")
    if end is not None:
        header, rows = table(shape)
        s, e = header.index(start), header.index(end)
        rows[BAD][s], rows[BAD][e] = rows[BAD][e], rows[BAD][s]
        data = v.encode(header, rows)
        cases.append(_case(v, "end-before-start", data, Fail(row, end, ("before",))))
    return cases


def text_defects(v: Variant) -> list[Case]:
    """Defects of the text itself: NUL, encoding, BOM, ragged rows, duplicate names."""
    shape = v.shape
    row = v.row_number(BAD)
    text = shape.roles.get("text")
    header, rows = table(shape)
    cases = []
    if text is not None and v.container != "json":
        data, _ = _with_cell(v, text, "gpu\x00node")
        cases.append(_case(v, "nul-byte", data, Fail(row, text, ("NUL",))))
    if v.id == "gcp-parquet":  # inside a repeated record: named by its path
        data, _ = _with_cell(v, "labels", '[{"key": "team", "value": "vi\\u0000sion"}]')
        cases.append(_case(v, "nul-in-label", data, Fail(row, "labels.value", ("NUL",))))
    if v.container not in ("csv", "csv.gz", "zip", "jsonl"):
        return cases
    if text is not None:
        data, _ = _with_cell(v, text, "café-ü", encoding="latin-1")
        cases.append(_case(v, "latin-1", data, Fail(row, text, ("UTF-8",))))
    cases.append(_case(v, "bom", v.encode(header, rows, bom=True), Accept(as_dicts(header, rows))))
    if v.container == "jsonl":
        lines = encode_jsonl(header, rows).splitlines(keepends=True)
        lines[BAD] = lines[BAD][: len(lines[BAD]) // 2] + "\n"
        data = "".join(lines).encode()
        cases.append(_case(v, "broken-json-line", data, Fail(row, None, ("not valid JSON",))))
        return cases
    longer = [list(r) for r in rows]
    longer[BAD].append("extra")
    cases.append(_case(v, "ragged-long", v.encode(header, longer), Fail(row, None, ("values",))))
    shorter = [list(r) for r in rows]
    shorter[BAD].pop()
    expect: Fail | Accept = Fail(row, None, ("values",))
    if shape.format == "aws-cur":
        # Documented: a short CUR row's missing trailing cells are empty (koku's test CUR).
        expect = Accept(as_dicts(header, rows))
    cases.append(_case(v, "ragged-short", v.encode(header, shorter), expect))
    if v.container == "csv":
        cost = shape.roles["cost"]
        doubled = [*header, cost]
        data = v.encode(doubled, [[*r, "999"] for r in rows])
        cases.append(_case(v, "duplicate-column", data, Fail(1, cost, ("more than once",))))
    return cases


# More places than the ledger's 12 (MoneyField, decimal_places=12): each value is rounded
# half-even once, when read, and everything after (batch totals, attribution) sums the stored
# values, so nothing downstream can disagree. The ledger's total may differ from the file's exact
# sum by at most half a 10^-12 per row; here 6.12345678901399 is stored as 6.123456789013.
PRECISE = ["1.0000000000005", "2.0000000000015", "3.1234567890125", "-0.00000000000051"]


def precision_case(v: Variant) -> list[Case]:
    header, rows = table(v.shape)
    cost = header.index(v.shape.roles["cost"])
    for row, value in zip(rows, PRECISE, strict=True):
        row[cost] = value
    return [_case(v, "precision", v.encode(header, rows), Accept(as_dicts(header, rows)))]


def corpus() -> list[Case]:
    cases = []
    for v in VARIANTS:
        cases += container_defects(v) + value_defects(v) + text_defects(v) + precision_case(v)
        if PLAIN[v.shape.name] is v or v.container == "parquet" or v.container == "jsonl":
            cases += missing_column_defects(v)
    return cases


# Another format's file given under --format F: fails, except a file that IS that format.
ACCEPTED_ELSEWHERE = {
    ("azure-focuscost", "focus"): "Azure's FocusCost export is FOCUS",
}


def wrong_format_cases() -> list[Case]:
    cases = []
    for shape in SHAPES.values():
        # BigQuery's CSV has other names than its JSON lines (dotted): both are tried.
        variants = [v for v in VARIANTS if v.shape is shape and v.container in ("csv", "jsonl")]
        for v in variants or [PLAIN[shape.name]]:
            header, rows = table(shape)
            data = v.encode(header, rows)
            for format_name in PRIMARY_FOR_FORMAT:
                if format_name == shape.format:
                    continue
                expect: Fail | Accept = Fail()
                if (shape.name, format_name) in ACCEPTED_ELSEWHERE:
                    expect = Accept(as_dicts(header, rows))
                cases.append(
                    Case(
                        f"{v.id}-as-{format_name}",
                        v,
                        f"{v.id}-as-{format_name}{v.suffix}",
                        data,
                        expect,
                        format=format_name,
                    )
                )
    return cases


CORPUS = corpus()
WRONG_FORMAT = wrong_format_cases()


# --------------------------------------------------------------------------- harness


@pytest.fixture(autouse=True)
def two_row_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    billing_parser("focus")  # fills the registry
    for name, parser in list(BILLING_PARSERS.items()):
        monkeypatch.setitem(BILLING_PARSERS, name, functools.partial(parser, chunk_size=2))


@pytest.fixture(autouse=True)
def coreweave_rate(db: None) -> None:
    CoreWeaveRate.objects.create(
        instance_type=H100,
        pricing_category="Standard",
        currency="USD",
        rate=CW_RATE,
        unit="Hours",
        valid_from=datetime(2024, 1, 1).date(),
    )


def ingest(path: Path, format_name: str) -> None:
    call_command(
        "ingest_billing",
        "--format",
        format_name,
        str(path),
        "--source",
        SOURCE,
        "--no-attribute",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )


def snapshot() -> tuple[int, Decimal, set[int]]:
    values = list(CostLineItem.objects.values_list("effective_cost", "batch_id"))
    return len(values), sum((v for v, _ in values), Decimal(0)), {b for _, b in values}


_MESSAGE_RE = re.compile(
    r"^file (?P<file>[^,:]+)(?:, row (?P<row>\d+))?(?:, column (?P<column>.+?))?: (?P<detail>.+)$",
    re.S,
)


def assert_message(error: str, name: str, expect: Fail) -> None:
    match = _MESSAGE_RE.match(error)
    assert match is not None, f"not 'file NAME[, row N][, column C]: detail': {error!r}"
    assert match["file"] == name, error
    if expect.row != ANY:
        row = None if match["row"] is None else int(match["row"])
        assert row == expect.row, f"row {row}, expected {expect.row}: {error}"
    if expect.column != ANY:
        assert match["column"] == expect.column, f"expected column {expect.column}: {error}"
    if expect.phrases:
        detail = error.lower()
        assert any(p.lower() in detail for p in expect.phrases), f"{expect.phrases}: {error}"


def run_case(case: Case, tmp_path: Path) -> None:
    good_variant = PRIMARY_FOR_FORMAT[case.format] if case.format else case.variant
    good = tmp_path / f"good{good_variant.suffix}"
    good.write_bytes(good_variant.encode(*table(good_variant.shape)))
    ingest(good, good_variant.shape.format)
    before = snapshot()
    assert before[0] == ROWS

    bad = tmp_path / case.name
    bad.write_bytes(case.data)
    if isinstance(case.expect, Accept):
        ingest(bad, case.format_name)
        assert_accepted(bad, case, case.expect)
        return
    with pytest.raises(CommandError) as raised:
        ingest(bad, case.format_name)
    batch = ImportBatch.objects.get(file_name=str(bad.resolve()))
    assert batch.status == ImportBatch.Status.FAILED
    assert batch.error in str(raised.value)
    assert_message(batch.error, bad.name, case.expect)
    assert not CostLineItem.objects.filter(batch=batch).exists()
    assert snapshot() == before
    previous = ImportBatch.objects.get(file_name=str(good.resolve()))
    assert previous.status == ImportBatch.Status.SUCCEEDED


def assert_accepted(path: Path, case: Case, expect: Accept) -> None:
    batch = ImportBatch.objects.get(file_name=str(path.resolve()))
    assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
    shape = case.variant.shape
    wanted = sorted(shape.effective_of(row) for row in expect.rows)
    stored = list(CostLineItem.objects.filter(batch=batch).values_list("effective_cost", flat=True))
    assert sorted(stored) == wanted
    assert set(CostLineItem.objects.values_list("billing_currency", flat=True)) == {expect.currency}
    # The batch's recorded total is the stored rows' sum: rounding never makes them differ.
    totals = batch.currency_totals[expect.currency]
    assert (totals["rows"], Decimal(totals["effective"])) == (len(wanted), sum(wanted))
    # The same month of the same source: the good rows were replaced, not added to.
    assert snapshot()[0] == len(wanted)


def test_every_billing_format_is_in_the_corpus() -> None:
    billing_parser("focus")
    assert set(PRIMARY_FOR_FORMAT) == set(BILLING_PARSERS)


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.id)
def test_bad_file_fails_alone_or_imports_exactly(case: Case, tmp_path: Path) -> None:
    run_case(case, tmp_path)


@pytest.mark.parametrize("case", WRONG_FORMAT, ids=lambda case: case.id)
def test_another_formats_file_is_refused(case: Case, tmp_path: Path) -> None:
    run_case(case, tmp_path)
