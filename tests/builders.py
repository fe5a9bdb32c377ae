"""Input rows shared by test files, in each native format (FOCUS, Slurm sacct, AWS CUR, GCP
BigQuery export records, Kubernetes pods), and the CSV writers for them. Deliveries to buckets
and recorded API responses are in the modules beside this one (cur_s3_deliveries.py,
gcs_exports.py, recorded_bigquery.py). Tests import these from here, never from another test
module."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

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
