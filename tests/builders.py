"""Input builders shared by test files: rows in each native format, file writers, recorded
responses. Tests import these from here, never from another test module."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
from django.core.management import call_command
from django.db import connection

from billing_ingest.models import CostLineItem
from billing_ingest.partitions import batch_tables, line_items_partitioned

# --- FOCUS 1.2 rows and CSV files -----------------------------------------------------------------


FOCUS_COLUMNS = [
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "BillingAccountId",
    "ProviderName",
    "ChargeCategory",
    "PricingCategory",
    "ServiceName",
    "SkuId",
    "ResourceId",
    "ResourceName",
    "ListCost",
    "BilledCost",
    "EffectiveCost",
    "BillingCurrency",
    "Tags",
]


def focus_row(**overrides: str) -> dict[str, str]:
    row = {
        "BillingPeriodStart": "2024-09-01T00:00:00Z",
        "BillingPeriodEnd": "2024-10-01T00:00:00Z",
        "ChargePeriodStart": "2024-09-05T10:00:00Z",
        "ChargePeriodEnd": "2024-09-05T11:00:00Z",
        "BillingAccountId": "123456789012",
        "ProviderName": "AWS",
        "ChargeCategory": "Usage",
        "PricingCategory": "Standard",
        "ServiceName": "Amazon Elastic Compute Cloud",
        "SkuId": "SKU1",
        "ResourceId": "i-0abc",
        "ResourceName": "gpu-node-1",
        "ListCost": "40.96",
        "BilledCost": "32.7726",
        "EffectiveCost": "32.7726",
        "BillingCurrency": "USD",
        "Tags": '{"team": "vision"}',
    }
    row.update(overrides)
    return row


def csv_text(rows: list[dict[str, str]], columns: list[str] | None = None) -> str:
    columns = columns or list(rows[0])
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write_focus_csv(
    path: Path, rows: list[dict[str, str]], columns: list[str] | None = None
) -> Path:
    path.write_text(csv_text(rows, columns), encoding="utf-8")
    return path


# --- Slurm `sacct --parsable2` output -------------------------------------------------------------


# What `sacct --parsable2 --format=<these>` prints as its first line.
SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|Account|User|Partition|State|Start|End|AllocTRES|NodeList|WCKey|Comment"
)
TRES_16 = "billing=128,cpu=128,gres/gpu:h100=16,gres/gpu=16,mem=1T,node=2"
TRES_8 = "billing=64,cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=512G,node=1"
STEP_8 = "cpu=64,gres/gpu:h100=8,gres/gpu=8,mem=512G,node=1"
TRES_1 = "billing=8,cpu=8,gres/gpu:a100=1,gres/gpu=1,mem=64G,node=1"

FIRST_DUMP = [
    SACCT_HEADER,
    f"1001|1001|train-llama|vision|alice|gpu|COMPLETED|2024-09-03T10:00:00|2024-09-03T14:30:00|"
    f"{TRES_16}|gpu-[001-002]|*llama-7b|",
    f"1001.batch|1001.batch|batch|vision|||COMPLETED|2024-09-03T10:00:00|2024-09-03T14:30:00|"
    f"{STEP_8}|gpu-001||",
    f"1001.extern|1001.extern|extern|vision|||COMPLETED|2024-09-03T10:00:00|2024-09-03T14:30:00|"
    f"{TRES_16}|gpu-[001-002]||",
    f"1001.0|1001.0|torchrun|vision|||COMPLETED|2024-09-03T10:00:05|2024-09-03T14:29:50|"
    f"{TRES_16}|gpu-[001-002]||",
    f"1002_1|1003|sweep|speech|bob|gpu|FAILED|2024-09-03T11:00:00|2024-09-03T11:20:00|"
    f"{TRES_1}|gpu-003||run=sweep42 ckpt=5",
    f"1002_1.batch|1003.batch|batch|speech|||FAILED|2024-09-03T11:00:00|2024-09-03T11:20:00|"
    f"{TRES_1}|gpu-003||",
    "1002_[2-5%2]|1002|sweep|speech|bob|gpu|PENDING|Unknown|Unknown||None assigned||run=sweep42",
    f"1004|1004|notebook|vision|carol|interactive|RUNNING|2024-09-03T15:00:00|Unknown|"
    f"{TRES_8}|gpu-004||",
    "1005|1005|prep|vision|alice|cpu|CANCELLED by 1001|2024-09-03T09:00:00|2024-09-03T09:05:00|"
    "billing=4,cpu=4,mem=16G,node=1|cpu-01||",
]


# --- AWS CUR 2.0 and legacy CUR rows --------------------------------------------------------------


RI_ARN = (
    "arn:aws:ec2:us-east-1:111122223333:reserved-instances/4f1e3a2b-aaaa-bbbb-cccc-0123456789ab"
)


SP_ARN = "arn:aws:savingsplans::111122223333:savingsplan/222799db-06f1-499d-995a-7a18eea14583"


CUR2_COLUMNS = [
    "identity_line_item_id",
    "bill_billing_period_start_date",
    "bill_billing_period_end_date",
    "bill_payer_account_id",
    "line_item_usage_account_id",
    "line_item_line_item_type",
    "line_item_usage_start_date",
    "line_item_usage_end_date",
    "line_item_product_code",
    "line_item_usage_type",
    "line_item_resource_id",
    "line_item_usage_amount",
    "line_item_currency_code",
    "line_item_unblended_cost",
    "pricing_unit",
    "pricing_public_on_demand_cost",
    "product",
    "product_sku",
    "product_region_code",
    "product_instance_type",
    "reservation_reservation_a_r_n",
    "reservation_effective_cost",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "savings_plan_savings_plan_a_r_n",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
    "resource_tags",
]


def cur2_row(**overrides: str) -> dict[str, str]:
    row = {name: "" for name in CUR2_COLUMNS}
    row.update(
        {
            "identity_line_item_id": "li-1",
            "bill_billing_period_start_date": "2024-09-01T00:00:00.000Z",
            "bill_billing_period_end_date": "2024-10-01T00:00:00.000Z",
            "bill_payer_account_id": "111122223333",
            "line_item_usage_account_id": "444455556666",
            "line_item_line_item_type": "Usage",
            "line_item_usage_start_date": "2024-09-05T10:00:00.000Z",
            "line_item_usage_end_date": "2024-09-05T11:00:00.000Z",
            "line_item_product_code": "AmazonEC2",
            "line_item_usage_type": "USE1-BoxUsage:p4d.24xlarge",
            "line_item_resource_id": "i-0abc",
            "line_item_usage_amount": "1.0",
            "line_item_currency_code": "USD",
            "line_item_unblended_cost": "32.7726",
            "pricing_unit": "Hrs",
            "pricing_public_on_demand_cost": "32.7726",
            "product": json.dumps({"product_name": "Amazon Elastic Compute Cloud"}),
            "product_sku": "SKU-P4D",
            "product_region_code": "us-east-1",
            "product_instance_type": "p4d.24xlarge",
            "resource_tags": json.dumps({"user_team": "vision"}),
        }
    )
    row.update(overrides)
    return row


LEGACY_FROM_CUR2 = {
    "identity_line_item_id": "identity/LineItemId",
    "bill_billing_period_start_date": "bill/BillingPeriodStartDate",
    "bill_billing_period_end_date": "bill/BillingPeriodEndDate",
    "bill_payer_account_id": "bill/PayerAccountId",
    "line_item_usage_account_id": "lineItem/UsageAccountId",
    "line_item_line_item_type": "lineItem/LineItemType",
    "line_item_usage_start_date": "lineItem/UsageStartDate",
    "line_item_usage_end_date": "lineItem/UsageEndDate",
    "line_item_product_code": "lineItem/ProductCode",
    "line_item_usage_type": "lineItem/UsageType",
    "line_item_resource_id": "lineItem/ResourceId",
    "line_item_usage_amount": "lineItem/UsageAmount",
    "line_item_currency_code": "lineItem/CurrencyCode",
    "line_item_unblended_cost": "lineItem/UnblendedCost",
    "pricing_unit": "pricing/unit",
    "pricing_public_on_demand_cost": "pricing/publicOnDemandCost",
    "product_sku": "product/sku",
    "product_region_code": "product/regionCode",
    "product_instance_type": "product/instanceType",
    "reservation_reservation_a_r_n": "reservation/ReservationARN",
    "reservation_effective_cost": "reservation/EffectiveCost",
    "savings_plan_savings_plan_a_r_n": "savingsPlan/SavingsPlanARN",
    "savings_plan_savings_plan_effective_cost": "savingsPlan/SavingsPlanEffectiveCost",
}


def legacy_row(**overrides: str) -> dict[str, str]:
    cur2 = cur2_row(**overrides)
    row = {legacy: cur2[snake] for snake, legacy in LEGACY_FROM_CUR2.items()}
    row["product/ProductName"] = "Amazon Elastic Compute Cloud"
    row["resourceTags/user:team"] = "vision"
    row["resourceTags/user:Name"] = "gpu-node-1"
    row["resourceTags/aws:createdBy"] = "IAMUser:x"
    return row


# --- GCP BigQuery export records (JSON lines shape) -----------------------------------------------


A3_SPEC = [{"key": "compute.googleapis.com/machine_spec", "value": "a3-highgpu-8g"}]


def nested_record(**overrides: Any) -> dict[str, Any]:
    """The same line item as csv_row(), shaped as BigQuery writes JSON lines."""
    record: dict[str, Any] = {
        "billing_account_id": "0000AA-BBBBBB-CCCCCC",
        "service": {"id": "6F81-5844-456A", "description": "Compute Engine"},
        "sku": {"id": "SKU-A3", "description": "A3 Instance Core running in Americas"},
        "usage_start_time": "2024-09-14 10:00:00 UTC",
        "usage_end_time": "2024-09-14 11:00:00 UTC",
        "project": {"id": "ml-prod", "labels": [{"key": "team", "value": "platform"}]},
        "labels": [{"key": "team", "value": "vision"}],
        "system_labels": A3_SPEC,
        "location": {"region": "us-central1"},
        "cost": 88.49,
        "currency": "USD",
        "usage": {"amount": 3600, "unit": "seconds"},
        "credits": [{"name": "CUD", "amount": -10.5, "type": "COMMITTED_USAGE_DISCOUNT"}],
        "invoice": {"month": "202409"},
        "cost_type": "regular",
        "resource": {
            "name": "gke-train-a3-pool-1a2b3c4d-x9z8",
            "global_name": "//compute.googleapis.com/projects/ml-prod/zones/us-central1-a/"
            "instances/gke-train-a3-pool-1a2b3c4d-x9z8",
        },
    }
    record.update(overrides)
    return record


# --- Kubernetes pods (`kubectl get pods -A -o json`) ----------------------------------------------


POD_START = "2025-06-03T10:00:00Z"


def container(name: str = "main", **limits: Any) -> dict[str, Any]:
    resources = {"limits": {"cpu": "8", "memory": "64Gi", **limits}} if limits else {}
    return {"name": name, "image": "trainer:1", "resources": resources}


def pod(
    name: str = "train-0",
    namespace: str = "vision",
    *,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    phase: str = "Running",
    node: str | None = "gpu-node-1",
    start: str | None = POD_START,
    finished: list[str | None] | None = None,
    labels: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    reason: str | None = None,
    terminated_reasons: list[str] | None = None,
) -> dict[str, Any]:
    """A pod as the API server prints it (the fields the parser reads, and some it does not)."""
    containers = containers if containers is not None else [container(**{"nvidia.com/gpu": "1"})]
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "creationTimestamp": "2025-06-03T09:59:50Z",
        "labels": labels or {},
    }
    if owners is not None:
        metadata["ownerReferences"] = owners
    spec: dict[str, Any] = {"containers": containers, "restartPolicy": "Never"}
    if init is not None:
        spec["initContainers"] = init
    if node is not None:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if start is not None:
        status["startTime"] = start
    if reason is not None:
        status["reason"] = reason
    statuses = []
    for i, c in enumerate(containers):
        ends = finished or []
        end = ends[i] if i < len(ends) else None
        if end is not None:
            why = (terminated_reasons or [])[i] if i < len(terminated_reasons or []) else None
            state = {
                "terminated": {
                    "exitCode": 0 if phase == "Succeeded" else 1,
                    "reason": why or ("Completed" if phase == "Succeeded" else "Error"),
                    "startedAt": start,
                    "finishedAt": end,
                }
            }
        else:
            state = {"running": {"startedAt": start}}
        statuses.append({"name": c["name"], "ready": end is None, "state": state})
    status["containerStatuses"] = statuses
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def pod_list(*pods: dict[str, Any]) -> dict[str, Any]:
    """What `kubectl get pods -A -o json` prints."""
    return {
        "apiVersion": "v1",
        "items": list(pods),
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }


# --- AWS Data Exports (CUR 2.0) delivered to S3 (moto: the s3 fixture of conftest) ----------------


S3_BUCKET = "billing-exports"


S3_PREFIX = "cur"


CUR_EXPORT = "gpu-cur2"


S3_ROOT = f"{S3_PREFIX}/{CUR_EXPORT}"


S3_URI = f"s3://{S3_BUCKET}/{S3_ROOT}"


S3_SOURCE = f"aws-cur:{S3_URI}"


CUR_HEADER = (
    "bill_billing_period_start_date,line_item_line_item_type,line_item_usage_start_date,"
    "line_item_usage_end_date,line_item_unblended_cost,line_item_currency_code\n"
)


def cur_part(period: str, costs: list[str]) -> bytes:
    rows = "".join(
        f"{period}-01T00:00:00Z,Usage,{period}-02T{h:02d}:00:00Z,{period}-02T{h + 1:02d}:00:00Z,"
        f"{cost},USD\n"
        for h, cost in enumerate(costs)
    )
    return gzip.compress((CUR_HEADER + rows).encode())


def deliver(
    s3: Any, period: str, version: str, parts: list[list[str]], *, skip: int | None = None
) -> list[str]:
    """Write one delivery as AWS does: data parts, then the manifest. ``skip`` leaves that part
    index out of the bucket (the manifest still names it). Returns the data keys."""
    keys = [
        f"{S3_ROOT}/data/BILLING_PERIOD={period}/{version}/{CUR_EXPORT}-{i + 1:05d}.csv.gz"
        for i in range(len(parts))
    ]
    for index, (key, costs) in enumerate(zip(keys, parts, strict=True)):
        if index != skip:
            s3.put_object(Bucket=S3_BUCKET, Key=key, Body=cur_part(period, costs))
    manifest = {
        "exportName": CUR_EXPORT,
        "billingPeriod": {"start": f"{period}-01T00:00:00.000Z"},
        "dataFiles": [f"s3://{S3_BUCKET}/{key}" for key in keys],
    }
    s3.put_object(
        Bucket=S3_BUCKET,
        Key=f"{S3_ROOT}/metadata/BILLING_PERIOD={period}/{version}/{CUR_EXPORT}-Manifest.json",
        Body=json.dumps(manifest).encode(),
    )
    return keys


def ingest_s3(uri: str = S3_URI, *args: str) -> str:
    out = io.StringIO()
    call_command(
        "ingest_billing",
        "--format",
        "aws-cur",
        uri,
        "--no-attribute",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def month_total(month: str) -> Decimal:
    rows = CostLineItem.objects.filter(source=S3_SOURCE, billing_period=f"{month}-01")
    return sum((row.effective_cost for row in rows), Decimal(0))


def loaded_rows(batch_id: int) -> int:
    """The batch's line items, and the rows its parts loaded that no finish step attached yet
    (on PostgreSQL they wait in loading tables of their own: billing_ingest.partitions)."""
    count = CostLineItem.objects.filter(batch_id=batch_id).count()
    if not line_items_partitioned():
        return count
    with connection.cursor() as cursor:
        for name in batch_tables(batch_id=batch_id):
            if re.search(r"_p[0-9]+$", name):
                cursor.execute(f'SELECT count(*) FROM "{name}"')
                count += int(cursor.fetchone()[0])
    return count


def ledger() -> list[tuple[int, str, str, str]]:
    rows = CostLineItem.objects.order_by("id")
    return [(r.batch_id, r.source, str(r.billing_period), str(r.effective_cost)) for r in rows]


def costs_sum(parts: list[list[str]]) -> Decimal:
    return sum((Decimal(c) for part in parts for c in part), Decimal(0))


def cur_parquet_part(period: str, costs: list[str]) -> bytes:
    table = pa.table(
        {
            "bill_billing_period_start_date": [f"{period}-01T00:00:00Z"] * len(costs),
            "line_item_line_item_type": ["Usage"] * len(costs),
            "line_item_usage_start_date": [f"{period}-02T00:00:00Z"] * len(costs),
            "line_item_usage_end_date": [f"{period}-02T01:00:00Z"] * len(costs),
            "line_item_unblended_cost": costs,
            "line_item_currency_code": ["USD"] * len(costs),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


# --- BigQuery REST responses, recorded shapes served to the real client by `responses` ------------


BQ_PROJECT = "finops-billing"


BQ_DATASET = "billing_export"


BQ_TABLE = "gcp_billing_export_resource_v1_0123AB_4567CD_89EF01"


BQ_TABLE_ID = f"{BQ_PROJECT}.{BQ_DATASET}.{BQ_TABLE}"


BQ_URI = f"bq://{BQ_TABLE_ID}"


BQ_SOURCE = f"gcp-bigquery:{BQ_URI}"


BQ_API = "https://bigquery.googleapis.com/bigquery/v2"


BQ_LOCATION = "US"


def field(
    name: str,
    type_: str = "STRING",
    mode: str = "NULLABLE",
    fields: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": type_, "mode": mode}
    if fields is not None:
        out["fields"] = fields
    return out


KEY_VALUE = [field("key"), field("value")]


# The detailed (resource-level) export's schema, as tables.get returns it (abridged: columns the
# importer does not select, like export_time and price, show that it selects only what it needs).
TABLE_SCHEMA = [
    field("billing_account_id"),
    field("service", "RECORD", fields=[field("id"), field("description")]),
    field("sku", "RECORD", fields=[field("id"), field("description")]),
    field("usage_start_time", "TIMESTAMP"),
    field("usage_end_time", "TIMESTAMP"),
    field(
        "project",
        "RECORD",
        fields=[
            field("id"),
            field("number"),
            field("name"),
            field("labels", "RECORD", "REPEATED", KEY_VALUE),
            field("ancestry_numbers"),
        ],
    ),
    field("labels", "RECORD", "REPEATED", KEY_VALUE),
    field("system_labels", "RECORD", "REPEATED", KEY_VALUE),
    field(
        "location",
        "RECORD",
        fields=[field("location"), field("country"), field("region"), field("zone")],
    ),
    field("resource", "RECORD", fields=[field("name"), field("global_name")]),
    field("export_time", "TIMESTAMP"),
    field("cost", "FLOAT"),
    field("currency"),
    field("currency_conversion_rate", "FLOAT"),
    field(
        "usage",
        "RECORD",
        fields=[
            field("amount", "FLOAT"),
            field("unit"),
            field("amount_in_pricing_units", "FLOAT"),
            field("pricing_unit"),
        ],
    ),
    field(
        "credits",
        "RECORD",
        "REPEATED",
        [field("name"), field("amount", "FLOAT"), field("full_name"), field("id"), field("type")],
    ),
    field("invoice", "RECORD", fields=[field("month"), field("publisher_type")]),
    field("cost_type"),
    field("price", "RECORD", fields=[field("effective_price", "NUMERIC"), field("unit")]),
]


SELECTED = [
    "billing_account_id",
    "service",
    "sku",
    "usage_start_time",
    "usage_end_time",
    "project",
    "labels",
    "system_labels",
    "location",
    "resource",
    "cost",
    "currency",
    "usage",
    "credits",
    "invoice",
    "cost_type",
]


RESULT_SCHEMA = [f for name in SELECTED for f in TABLE_SCHEMA if f["name"] == name]


ROWS_SQL = (
    "SELECT "
    + ", ".join(f"`{name}`" for name in SELECTED)
    + f" FROM `{BQ_TABLE_ID}` WHERE invoice.month = @month"
)


def micros(text: str) -> str:
    """A TIMESTAMP cell as getQueryResults sends it with formatOptions.useInt64Timestamp."""
    stamp = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return str(int(stamp.timestamp()) * 1_000_000)


def cells(*values: Any) -> dict:
    return {"f": [{"v": value} for value in values]}


def key_values(pairs: dict[str, str]) -> list[dict]:
    return [{"v": cells(key, value)} for key, value in pairs.items()]


def export_row(
    *,
    month: str,
    cost: str,
    credits: Sequence[tuple[str, str]] = (),
    sku: tuple[str, str] = ("039F-D0DA-4055", "Nvidia Tesla A100 GPU running in Americas"),
    cost_type: str = "regular",
    team: str = "vision",
    day: str = "02",
) -> dict:
    """One result row in REST form ({"f": [{"v": ...}]}), in SELECTED's column order."""
    start = f"{month[:4]}-{month[4:]}-{day}T10:00:00"
    end = f"{month[:4]}-{month[4:]}-{day}T11:00:00"
    return cells(
        "0123AB-4567CD-89EF01",
        cells("6F81-5844-456A", "Compute Engine"),
        cells(*sku),
        micros(start),
        micros(end),
        cells("ml-train", "123456789012", "ml-train", key_values({"cost-center": "r-and-d"}), None),
        key_values({"team": team}),
        key_values({"compute.googleapis.com/machine_spec": "a2-highgpu-1g"}),
        cells("us-central1", "US", "us-central1", "us-central1-a"),
        cells("trainer-0", "//compute.googleapis.com/projects/ml-train/instances/123"),
        cost,
        "USD",
        cells("3600.0", "seconds", "1.0", "hour"),
        [
            {"v": cells(name, amount, name, f"id-{name}", "SUSTAINED_USAGE_DISCOUNT")}
            for name, amount in credits
        ],
        cells(month, None),
        cost_type,
    )


def error_body(code: int, reason: str, message: str) -> str:
    return json.dumps(
        {
            "error": {
                "code": code,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}],
                "status": "PERMISSION_DENIED" if code == 403 else "NOT_FOUND",
            }
        }
    )


class RecordedBigQuery:
    """Serves recorded BigQuery REST responses to the real client.

    tables.get returns TABLE_SCHEMA; jobs.insert echoes the job as DONE; jobs.getQueryResults
    answers the count query with ``counts`` and the rows query of a month with its pages (a
    pageToken between pages, as BigQuery pages large results). ``deny`` maps an endpoint name
    ("tables.get", "jobs.insert") to a recorded 403."""

    def __init__(self, mock: Any) -> None:
        self.months: dict[str, list[list[dict]]] = {}
        self.deny: dict[str, str] = {}
        self.jobs: dict[str, dict] = {}
        self.inserted: list[dict] = []
        table = re.compile(
            rf"{re.escape(BQ_API)}/projects/{BQ_PROJECT}/datasets/{BQ_DATASET}/tables/\w+"
        )
        mock.add_callback("GET", table, callback=self.tables_get)
        mock.add_callback("POST", f"{BQ_API}/projects/{BQ_PROJECT}/jobs", callback=self.jobs_insert)
        results = re.compile(rf"{re.escape(BQ_API)}/projects/{BQ_PROJECT}/queries/[\w-]+")
        mock.add_callback("GET", results, callback=self.get_query_results)

    def tables_get(self, request: Any) -> tuple[int, dict, str]:
        if "tables.get" in self.deny:
            return 403, {}, error_body(403, "accessDenied", self.deny["tables.get"])
        name = urlsplit(request.url).path.rsplit("/", 1)[1]
        if name != BQ_TABLE:
            message = f"Not found: Table {BQ_PROJECT}:{BQ_DATASET}.{name}"
            return 404, {}, error_body(404, "notFound", message)
        resource = {
            "kind": "bigquery#table",
            "id": f"{BQ_PROJECT}:{BQ_DATASET}.{BQ_TABLE}",
            "tableReference": {
                "projectId": BQ_PROJECT,
                "datasetId": BQ_DATASET,
                "tableId": BQ_TABLE,
            },
            "schema": {"fields": TABLE_SCHEMA},
            "timePartitioning": {"type": "DAY"},
            "location": BQ_LOCATION,
            "type": "TABLE",
        }
        return 200, {}, json.dumps(resource)

    def jobs_insert(self, request: Any) -> tuple[int, dict, str]:
        if "jobs.insert" in self.deny:
            return 403, {}, error_body(403, "accessDenied", self.deny["jobs.insert"])
        job = json.loads(request.body)
        self.inserted.append(job)
        job_id = job["jobReference"]["jobId"]
        self.jobs[job_id] = job
        job["status"] = {"state": "DONE"}
        job["statistics"] = {"query": {"totalBytesProcessed": "1024"}}
        job["configuration"]["query"]["destinationTable"] = {
            "projectId": BQ_PROJECT,
            "datasetId": "_anon",
            "tableId": f"anon{job_id[:8]}",
        }
        return 200, {}, json.dumps(job)

    def _pages(self, job: dict) -> tuple[list[dict], list[list[dict]]]:
        query = job["configuration"]["query"]
        parameters = {p["name"]: p["parameterValue"] for p in query.get("queryParameters", [])}
        if query["query"] == ROWS_SQL:
            month = parameters["month"]["value"]
            return RESULT_SCHEMA, self.months.get(month, [[]])
        if "COUNT(*)" in query["query"]:
            asked = [v["value"] for v in parameters["months"]["arrayValues"]]
            counts = [
                cells(m, str(sum(len(p) for p in self.months[m])))
                for m in asked
                if m in self.months
            ]
            return [field("month"), field("row_count", "INTEGER")], [counts]
        raise AssertionError(f"unrecorded query {query['query']!r}")

    def get_query_results(self, request: Any) -> tuple[int, dict, str]:
        job_id = urlsplit(request.url).path.rsplit("/", 1)[1]
        params = parse_qs(urlsplit(request.url).query)
        job = self.jobs[job_id]
        schema, pages = self._pages(job)
        body: dict[str, Any] = {
            "kind": "bigquery#getQueryResultsResponse",
            "jobReference": job["jobReference"],
            "totalRows": str(sum(len(page) for page in pages)),
            "jobComplete": True,
            "schema": {"fields": schema},
        }
        if params.get("maxResults") == ["0"]:  # the client waiting for the job: no rows
            return 200, {}, json.dumps(body)
        index = int(params.get("pageToken", ["page-0"])[0].removeprefix("page-"))
        if pages[index]:
            body["rows"] = pages[index]
        if index + 1 < len(pages):
            body["pageToken"] = f"page-{index + 1}"
        return 200, {}, json.dumps(body)


def cost_of(pages: list[list[dict]]) -> tuple[Decimal, Decimal]:
    """(billed, effective) computed from the recorded cells: cost, and cost + credits."""
    billed = effective = Decimal(0)
    for page in pages:
        for row in page:
            values = row["f"]
            cost = Decimal(values[SELECTED.index("cost")]["v"])
            credits = values[SELECTED.index("credits")]["v"]
            billed += cost
            effective += cost + sum(Decimal(c["v"]["f"][1]["v"]) for c in credits)
    return billed, effective


# --- GCS deliveries of BigQuery exports (gcp-storage-emulator: the bucket fixture of conftest) ----


GCS_BUCKET = "billing-exports"


GCS_ROOT = "gcp/detailed"


GCS_URI = f"gs://{GCS_BUCKET}/gcp"


GCS_SOURCE = f"gcp-bigquery:gs://{GCS_BUCKET}/{GCS_ROOT}"


def gcs_upload(bucket: Any, name: str, data: bytes) -> str:
    bucket.blob(name).upload_from_string(data)
    return name


def month_records(month: str, costs: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """BigQuery export records of one invoice month: (cost, credit) each, credit <= 0."""
    year, mm = month[:4], month[4:]
    return [
        nested_record(
            usage_start_time=f"{year}-{mm}-{day + 1:02d} 10:00:00 UTC",
            usage_end_time=f"{year}-{mm}-{day + 1:02d} 11:00:00 UTC",
            cost=cost,
            credits=[{"name": "SUD", "amount": credit, "type": "SUSTAINED_USAGE_DISCOUNT"}],
            invoice={"month": month},
        )
        for day, (cost, credit) in enumerate(costs)
    ]


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def export_month(bucket: Any, folder: str, shards: list[bytes]) -> list[str]:
    """A month as EXPORT DATA writes it: numbered shards, then a _SUCCESS marker."""
    names = [
        gcs_upload(bucket, f"{folder}/billing-{index:012d}.json", data)
        for index, data in enumerate(shards)
    ]
    gcs_upload(bucket, f"{folder}/_SUCCESS", b"")
    return names


def uploaded(*shards: bytes) -> list[dict[str, Any]]:
    """The records in uploaded shards, every JSON number read exactly."""
    records = []
    for data in shards:
        text = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        records += [json.loads(line, parse_float=Decimal) for line in text.decode().splitlines()]
    return records


def gcs_totals(*shards: bytes) -> tuple[Decimal, Decimal]:
    """(BilledCost, EffectiveCost) summed straight from the uploaded rows: cost, and cost plus
    its credits."""
    records = uploaded(*shards)
    billed = sum((r["cost"] for r in records), Decimal(0))
    credits = sum((c["amount"] for r in records for c in r["credits"]), Decimal(0))
    return billed, billed + credits


def ledger_totals(source: str, month: str) -> tuple[Decimal, Decimal]:
    rows = CostLineItem.objects.filter(source=source, billing_period=f"{month}-01")
    billed = sum((row.billed_cost for row in rows), Decimal(0))
    return billed, sum((row.effective_cost for row in rows), Decimal(0))


GCS_SEPTEMBER = [
    jsonl(month_records("202409", [(88.49, -10.5), (1.25, 0)])),
    gzip.compress(jsonl(month_records("202409", [(0.000123, -0.000023)]))),
    jsonl(month_records("202409", [(3.5, -0.5), (7, 0), (12.125, -2)])),
]


GCS_OCTOBER = [jsonl(month_records("202410", [(40, -4)]))]


# --- A clock for timestamps servers stamp ---------------------------------------------------------


class Clock:
    """A clock the test moves by hand, for timestamps a server stamps at one-second resolution
    (S3 LastModified, Azure Last-Modified): `tick()` instead of sleeping past the second."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def tick(self, seconds: int = 1) -> None:
        self.now += timedelta(seconds=seconds)
