"""AWS Data Exports (CUR 2.0) deliveries to S3 for the tests that read them from a bucket (moto:
the s3 fixture of conftest): the bucket's layout, data parts and manifests as AWS writes them,
the import command over them, and sums of what the ledger holds."""

from __future__ import annotations

import gzip
import io
import json
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.core.management import call_command
from django.db import connection

from billing_ingest.loading.partitions import batch_tables, line_items_partitioned
from billing_ingest.models import CostLineItem

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
    (on PostgreSQL they wait in loading tables of their own: billing_ingest.loading.partitions)."""
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
