"""BigQuery billing exports delivered to Google Cloud Storage (gcp-storage-emulator: the bucket
fixture of conftest): JSON lines shards of a month as EXPORT DATA writes them, and sums of what
was uploaded and what the ledger holds."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from typing import Any

from billing_ingest.models import CostLineItem
from tests.builders import nested_record

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
    """(BilledCost, EffectiveCost) summed straight from the uploaded rows: both cost plus its
    credits, which is what Google invoices."""
    records = uploaded(*shards)
    cost = sum((r["cost"] for r in records), Decimal(0))
    credits = sum((c["amount"] for r in records for c in r["credits"]), Decimal(0))
    return cost + credits, cost + credits


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
