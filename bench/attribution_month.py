"""The month the attribution benchmark attributes (bench/attribution.py; bench/api_load.py loads
it too): N 8-GPU nodes billed hourly for January 2025 and J jobs, built row by row through the
ORM (INSERTs, or COPY for big months), by PostgreSQL itself (bench/month_sql.py), or tiled
from a smaller month on the server."""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

MONTH = dt.date(2025, 1, 1)
HOURS = 31 * 24
CHUNK = 5000
# Share of GPU capacity the generated jobs ask for (before random placement collisions).
UTILISATION = 0.7


def _chunks(rows: Iterator[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def build_month(nodes: int, jobs: int, seed: int) -> dict[str, float]:
    from django.db import transaction

    from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
    from finops.attribution.models import IdlePolicy, SharedCostRule

    rng = random.Random(seed)
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    hour = dt.timedelta(hours=1)
    # Three node pools a, b, c; pool a spreads its idle (see the IdlePolicy below).
    names = [f"gpu-{'abc'[i % 3]}{i:05d}" for i in range(nodes)]
    began = time.perf_counter()
    with transaction.atomic():
        billing = ImportBatch.objects.create(
            kind="billing", format="focus", source="aws", file_name="bench", status="succeeded"
        )
        job_batch = ImportBatch.objects.create(
            kind="jobs", format="slurm", source="c1", file_name="bench", status="succeeded"
        )

        def node_lines() -> Iterator[CostLineItem]:
            for i, name in enumerate(names):
                # Prices with all the decimals a bill has, different per node.
                price = Decimal("98.32") + Decimal(i % 97).scaleb(-9)
                # A third of the nodes are committed (cost below ListCost: the on-demand
                # equivalent gets its own split); the rest on demand (ListCost == cost).
                committed = i % 3 == 0
                listed = Decimal("137.6123") if committed else price
                pricing = "Committed" if committed else "Standard"
                for h in range(HOURS):
                    yield CostLineItem(
                        batch=billing, source="aws", billing_period=MONTH,
                        billing_period_start=start, provider_name="AWS",
                        billing_account_id=f"acct-{i % 3}", billing_currency="USD",
                        charge_period_start=start + h * hour,
                        charge_period_end=start + (h + 1) * hour, charge_category="Usage",
                        pricing_category=pricing, service_category="Compute",
                        service_name="Amazon EC2", resource_id=f"i-{i:08x}", resource_name=name,
                        billed_cost=price, effective_cost=price, x_instance_type="p5.48xlarge",
                        list_cost=listed, contracted_cost=price,
                    )  # fmt: skip

        def other_lines() -> Iterator[CostLineItem]:
            for d in range(31):
                day = start + dt.timedelta(days=d)
                for k in range(10):
                    yield CostLineItem(
                        batch=billing, source="aws", billing_period=MONTH,
                        billing_period_start=start, provider_name="AWS",
                        billing_account_id="acct-0", billing_currency="USD",
                        charge_period_start=day, charge_period_end=day + dt.timedelta(days=1),
                        charge_category="Usage", service_category="Storage",
                        service_name="Amazon S3", billed_cost=Decimal("12.5"),
                        effective_cost=Decimal("12.5"), tags={"team": f"team-{k}"},
                    )  # fmt: skip
                yield CostLineItem(
                    batch=billing, source="aws", billing_period=MONTH, billing_period_start=start,
                    provider_name="AWS", billing_account_id="acct-0", billing_currency="USD",
                    charge_period_start=day, charge_period_end=day + dt.timedelta(days=1),
                    charge_category="Usage", service_category="Support",
                    service_name="AWS Support", billed_cost=Decimal("333.333333333333"),
                    effective_cost=Decimal("333.333333333333"),
                )  # fmt: skip

        for batch in _chunks(node_lines()):
            CostLineItem.objects.bulk_create(batch)
        CostLineItem.objects.bulk_create(list(other_lines()))

        mean_gpu_seconds = UTILISATION * nodes * 8 * HOURS * 3600 / jobs

        def job_rows() -> Iterator[JobRecord]:
            for j in range(jobs):
                count = rng.choices([1, 2, 4], weights=[85, 10, 5])[0]
                per_node = rng.choice([Decimal(8), Decimal(4), Decimal(2), Decimal(1),
                                       Decimal("0.5")])  # fmt: skip
                gpus = per_node * count
                seconds = max(60, int(rng.expovariate(1 / (mean_gpu_seconds / float(gpus)))))
                begin = start + dt.timedelta(seconds=rng.randrange(HOURS * 3600))
                first = rng.randrange(nodes)
                yield JobRecord(
                    batch=job_batch, cluster="c1", job_id=str(j), name=f"job-{j}",
                    account=f"team-{(j // 10) % 20}",  # a run (10 jobs) is one team's
                    state="FAILED" if j % 17 == 0 else "COMPLETED",
                    start=begin, end=begin + dt.timedelta(seconds=seconds), gpus=gpus,
                    nodes=[names[(first + k) % nodes] for k in range(count)],
                    run_id=f"run-{j // 10}",
                )  # fmt: skip

        for batch in _chunks(job_rows()):
            JobRecord.objects.bulk_create(batch)
        IdlePolicy.objects.create(node_prefix="gpu-a", policy="spread", priority=10)
        SharedCostRule.objects.create(name="support", service_category="Support",
                                      method="gpu_spend")  # fmt: skip
    return {"build_s": time.perf_counter() - began}


def build_month_copy(nodes: int, jobs: int, seed: int) -> dict[str, float]:
    """build_month loading its rows with COPY (bench/api_load.py's _copy_bulk_create) rather
    than INSERTs, which take far too long at 10,000 nodes (PostgreSQL only)."""
    from unittest import mock

    from api_load import _copy_bulk_create

    from billing_ingest.models import CostLineItem, JobRecord

    with (
        mock.patch.object(CostLineItem.objects, "bulk_create", _copy_bulk_create(CostLineItem)),
        mock.patch.object(JobRecord.objects, "bulk_create", _copy_bulk_create(JobRecord)),
    ):
        built = build_month(nodes, jobs, seed)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return built


def build_month_sql(nodes: int, jobs: int, seed: int) -> dict[str, float]:
    """The same shape of month generated by PostgreSQL itself (bench/month_sql.py: same nodes,
    prices and job mix, jobs drawn by the server's random()), in seconds where the Python
    generator takes minutes: for the goal sizes, on PostgreSQL only."""
    from django.db import connection
    from month_sql import build_month_sql

    built = build_month_sql(nodes, jobs, seed)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return built


def tile_month(copies: int) -> dict[str, float]:
    """Make the month built `copies` times as big on the server (PostgreSQL): every node line
    and job copied copies - 1 times with the node renamed (gpu-a00012 -> gpu-a300012 in copy 3,
    pools and idle policy kept; resource ids, job and run ids suffixed). For a 10,000-node month
    where building every row in Python would take hours on this machine."""
    from django.db import connection

    from billing_ingest.models import CostLineItem, JobRecord

    began = time.perf_counter()
    node = "regexp_replace({col}, 'gpu-([abc])', 'gpu-\\1' || k, 'g')"
    renamed = {
        CostLineItem: {
            "resource_id": "resource_id || '-' || k",
            "resource_name": node.format(col="resource_name"),
        },
        JobRecord: {
            "nodes": node.format(col="nodes::text") + "::jsonb",
            "job_id": "job_id || '-' || k",
            "name": "name || '-' || k",
            "run_id": "run_id || '-' || k",
        },
    }
    where = {CostLineItem: "WHERE service_category = 'Compute'", JobRecord: ""}
    with connection.cursor() as cursor:
        for model, exprs in renamed.items():
            columns = [str(f.column) for f in model._meta.concrete_fields if not f.primary_key]
            names = ", ".join(connection.ops.quote_name(c) for c in columns)
            values = ", ".join(exprs.get(c, connection.ops.quote_name(c)) for c in columns)
            cursor.execute(
                f"INSERT INTO {model._meta.db_table} ({names}) SELECT {values} FROM "
                f"{model._meta.db_table} CROSS JOIN generate_series(1, %s) AS k {where[model]}",
                [copies - 1],
            )
        cursor.execute("ANALYZE")
    return {"tile_s": time.perf_counter() - began}
