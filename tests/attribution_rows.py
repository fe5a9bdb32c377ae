"""Ledger inputs written straight to the database for attribution tests: June 2025 line items
and jobs on hours counted from 2025-06-03 00:00 UTC, and `attribute --month` run as the command."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO
from typing import Any

from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)


def at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def billing_batch(status: str = ImportBatch.Status.SUCCEEDED) -> ImportBatch:
    return ImportBatch.objects.create(
        kind=ImportBatch.Kind.BILLING, format="focus", source="aws", file_name="f.csv",
        status=status,
    )  # fmt: skip


def line(batch: ImportBatch, cost: str, start: float, end: float, **fields: Any) -> CostLineItem:
    values: dict[str, Any] = {
        "batch": batch,
        "source": batch.source,
        "billing_period": MONTH,
        "billing_period_start": dt.datetime(2025, 6, 1, tzinfo=dt.UTC),
        "provider_name": "AWS",
        "billing_account_id": "111",
        "billing_currency": "USD",
        "charge_period_start": at(start),
        "charge_period_end": at(end),
        "billed_cost": Decimal(cost),
        "effective_cost": Decimal(cost),
        "service_name": "Amazon EC2",
    }
    values.update(fields)
    return CostLineItem.objects.create(**values)


def job(
    job_id: str, nodes: list[str], gpus: str, start: float, end: float | None, **fields: Any
) -> JobRecord:
    batch = ImportBatch.objects.filter(kind=ImportBatch.Kind.JOBS).first()
    if batch is None:
        batch = ImportBatch.objects.create(
            kind=ImportBatch.Kind.JOBS, format="slurm", source="c1", file_name="sacct.txt",
            status=ImportBatch.Status.SUCCEEDED,
        )  # fmt: skip
    values: dict[str, Any] = {
        "batch": batch,
        "cluster": "c1",
        "job_id": job_id,
        "state": "COMPLETED",
        "start": at(start),
        "end": None if end is None else at(end),
        "gpus": Decimal(gpus),
        "nodes": nodes,
        "account": "vision-team",
        "run_id": "r1",
    }
    values.update(fields)
    return JobRecord.objects.create(**values)


def attribute(month: str = "2025-06") -> str:
    out = StringIO()
    call_command("attribute", "--month", month, stdout=out)
    return out.getvalue()
