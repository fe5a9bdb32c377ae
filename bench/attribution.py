"""Attribution benchmark: one month of N 8-GPU nodes (hourly line items, 744 x N) and J jobs.

    python bench/attribution.py --nodes 1000 --jobs 300000     # the target size
    python bench/attribution.py --nodes 20 --jobs 3000         # a smoke run
    python bench/attribution.py --no-double --workers 1 2 4    # the month in 1, 2, 4 parts

Each size runs in a fresh child process with its own database (SQLite in a temp file, or a
scratch PostgreSQL database next to DATABASE_URL's when that is set, dropped afterwards), so
peak memory is per size. For each size it prints: the bulk load time; a baseline (just reading
the rows attribution reads, through the ORM); `attribute --month` end to end; the engine's
first pass alone on the loaded inputs (shares folded into ledger rows, as the service runs
it); the command's post-write checks alone; the rest (mostly writing the ledger); peak RSS
(ru_maxrss). Then it repeats at 2N / 2J and prints the time ratio (target <= 2.3:
attribution should scale linearly) and each size's ratio to its baseline.

The month is realistic on purpose: a third of the nodes spread their idle (a node-pool policy),
one shared-cost rule splits a daily support line, a few tagged storage lines, a third of the
nodes committed (ListCost above EffectiveCost, split as a column of its own), some jobs span
several nodes, some fractional GPUs, some oversubscription from the random placement.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from finops.core.months import month_format

ROOT = Path(__file__).resolve().parent.parent
MONTH = dt.date(2025, 1, 1)
HOURS = 31 * 24
CHUNK = 5000
# Share of GPU capacity the generated jobs ask for (before random placement collisions).
UTILISATION = 0.7


def _maxrss_mb() -> float:
    # Linux reports kilobytes.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _setup_django(database_url: str, *, broker: bool = False) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    if not broker:
        os.environ.pop("CELERY_BROKER_URL", None)  # run the task in-process
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _chunks(rows: Iterator[Any], size: int = CHUNK) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _build_month(nodes: int, jobs: int, seed: int) -> dict[str, float]:
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


def _build_month_copy(nodes: int, jobs: int, seed: int) -> dict[str, float]:
    """_build_month loading its rows with COPY (bench/api_load.py's _copy_bulk_create) rather
    than INSERTs, which take far too long at 10,000 nodes (PostgreSQL only)."""
    from unittest import mock

    from api_load import _copy_bulk_create

    from billing_ingest.models import CostLineItem, JobRecord

    with (
        mock.patch.object(CostLineItem.objects, "bulk_create", _copy_bulk_create(CostLineItem)),
        mock.patch.object(JobRecord.objects, "bulk_create", _copy_bulk_create(JobRecord)),
    ):
        built = _build_month(nodes, jobs, seed)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return built


def _build_month_sql(nodes: int, jobs: int, seed: int) -> dict[str, float]:
    """The same shape of month generated by PostgreSQL itself (bench/month_sql.py: same nodes,
    prices and job mix, jobs drawn by the server's random()), in seconds where the Python
    generator takes minutes: for the goal sizes, on PostgreSQL only."""
    from django.db import connection
    from month_sql import build_month_sql

    built = build_month_sql(nodes, jobs, seed)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return built


def _tile_month(copies: int) -> dict[str, float]:
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


def _time_baseline() -> float:
    """Reading the rows attribution reads (line items and jobs), through the ORM, and nothing
    else: the floor any attribution of this month pays."""
    from billing_ingest.models import JobRecord
    from finops.attribution.inputs import month as inputs

    began = time.perf_counter()
    for _ in inputs.lines_queryset(MONTH).iterator(chunk_size=inputs.BATCH_SIZE):
        pass
    for _ in JobRecord.objects.values_list(
        "id", "cluster", "job_id", "name", "account", "state", "start", "end", "gpus", "nodes",
        "run_id",
    ).iterator(chunk_size=inputs.BATCH_SIZE):  # fmt: skip
        pass
    return time.perf_counter() - began


def _child(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": args.nodes, "jobs": args.jobs}
    build = (
        _build_month_sql
        if args.generator == "sql"
        else (_build_month_copy if args.copy else _build_month)
    )
    if args.tile > 1:
        result.update(build(args.nodes // args.tile, args.jobs // args.tile, args.seed))
        result.update(_tile_month(args.tile))
    else:
        result.update(build(args.nodes, args.jobs, args.seed))
    result["rss_after_build_mb"] = _maxrss_mb()
    if args.split_only:
        from billing_ingest.models import CostLineItem

        result["line_items"] = CostLineItem.objects.count()
        return result

    from io import StringIO

    from django.core.management import call_command
    from django.db import transaction

    from billing_ingest.models import CostLineItem
    from finops.attribution import services
    from finops.attribution.inputs.month import inputs_load
    from finops.attribution.ledger.partial import part_first_pass
    from finops.attribution.models import AllocatedCost
    from finops.attribution.selectors import ledger as ledger_selectors

    result["line_items"] = CostLineItem.objects.count()
    result["baseline_read_s"] = _time_baseline()

    out = StringIO()
    began = time.perf_counter()
    call_command("attribute", "--month", month_format(MONTH), stdout=out)
    result["attribute_s"] = time.perf_counter() - began
    result["rss_after_attribute_mb"] = _maxrss_mb()
    result["ledger_rows"] = AllocatedCost.objects.count()
    result["balanced"] = "difference 0" in out.getvalue()

    # The command's post-write reads (category totals and the conservation check).
    began = time.perf_counter()
    ledger_selectors.month_category_totals(month=MONTH)
    ledger_selectors.month_conservation(month=MONTH)
    result["checks_s"] = time.perf_counter() - began

    if args.skip_whole:
        result.update(load_s=float("nan"), engine_s=float("nan"), first_pass_rows=0)
        return result
    # Load and engine alone, under the same conditions as in attribution_month_run (GC paused).
    with transaction.atomic(), services._gc_paused():
        began = time.perf_counter()
        inputs, _ = inputs_load(month=MONTH)
        result["load_s"] = time.perf_counter() - began
    if args.tracemalloc:
        tracemalloc.start()
    with services._gc_paused():
        began = time.perf_counter()
        # The engine as the service runs it: shares folded into ledger rows as they are made.
        first = part_first_pass(inputs)
        result["engine_s"] = time.perf_counter() - began
    if args.tracemalloc:
        result["engine_traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    result["first_pass_rows"] = len(first.ledger)
    return result


def _scratch_database(base_url: str) -> tuple[str, Any]:
    """A fresh database for one child: a temp SQLite file, or a scratch PostgreSQL database
    on DATABASE_URL's server, named after its database (never that one: the bench deletes
    ledgers)."""
    if not base_url:
        folder = tempfile.mkdtemp(prefix="finops-bench-")
        path = Path(folder) / "bench.sqlite3"

        def drop_sqlite() -> None:
            for file in Path(folder).iterdir():
                file.unlink()
            Path(folder).rmdir()

        return f"sqlite:///{path}", drop_sqlite
    import psycopg

    # DATABASE_URL's database need not exist: the scratch database is created and dropped
    # through the server's maintenance database, and only named after it.
    prefix, _, base_name = base_url.rpartition("/")
    base_name = base_name.split("?", 1)[0] or "finops"
    admin_url = f"{prefix}/postgres"
    name = f"{base_name}_bench_{os.getpid()}_{int(time.time())}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop_pg() -> None:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')

    return f"{prefix}/{name}", drop_pg


def _run_size(nodes: int, jobs: int, args: argparse.Namespace) -> dict[str, Any]:
    url, drop = _scratch_database(os.environ.get("DATABASE_URL", ""))
    command = [
        sys.executable, __file__, "--child", "--nodes", str(nodes), "--jobs", str(jobs),
        "--seed", str(args.seed), "--database-url", url,
    ]  # fmt: skip
    if args.tracemalloc:
        command.append("--tracemalloc")
    for flag in ("skip_whole", "copy", "split_only"):
        if getattr(args, flag):
            command.append(f"--{flag.replace('_', '-')}")
    command += ["--tile", str(args.tile), "--generator", args.generator]
    try:
        result = _child_json(command)
        if args.workers:
            workers = [str(n) for n in args.workers]
            result["workers"] = _child_json([*command, "--child-workers", "--workers", *workers])[
                "workers"
            ]
    finally:
        drop()
    return result


def _child_json(command: list[str]) -> dict[str, Any]:
    try:
        done = subprocess.run(command, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        sys.stderr.write(exc.stderr)
        raise
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _print(result: dict[str, Any]) -> None:
    if "attribute_s" not in result:  # --split-only
        print(
            f"nodes {result['nodes']}, jobs {result['jobs']}: {result['line_items']} line items, "
            f"built in {result['build_s']:.1f} s"
            + (f", tiled in {result['tile_s']:.1f} s" if "tile_s" in result else "")
        )
        if "workers" in result:
            from attribution_parts import print_runs

            print_runs(result["workers"])
        return
    print(
        f"nodes {result['nodes']}, jobs {result['jobs']}: {result['line_items']} line items, "
        f"{result['first_pass_rows']} first-pass rows, {result['ledger_rows']} ledger rows, "
        f"balanced {result['balanced']}"
    )
    print(f"  build (bulk load)        {result['build_s']:8.1f} s")
    print(f"  baseline (read rows)     {result['baseline_read_s']:8.1f} s")
    print(
        f"  attribute --month        {result['attribute_s']:8.1f} s  "
        f"({result['attribute_s'] / result['baseline_read_s']:.1f}x baseline)"
    )
    print(f"  load inputs alone        {result['load_s']:8.1f} s")
    print(f"  engine alone (1st pass)  {result['engine_s']:8.1f} s")
    print(
        f"  post-write checks        {result['checks_s']:8.1f} s  (category totals, conservation)"
    )
    rest = result["attribute_s"] - result["load_s"] - result["engine_s"] - result["checks_s"]
    print(f"  rest (write ledger, ...) {rest:8.1f} s  (attribute - load - engine - checks)")
    print(
        f"  peak RSS: {result['rss_after_build_mb']:.0f} MB after build, "
        f"{result['rss_after_attribute_mb']:.0f} MB after attribute"
    )
    if "engine_traced_peak_mb" in result:
        print(f"  engine traced peak       {result['engine_traced_peak_mb']:8.0f} MB")
    if "workers" in result:
        from attribution_parts import print_runs

        print_runs(result["workers"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-double", action="store_true", help="skip the 2N / 2J run")
    parser.add_argument(
        "--tracemalloc", action="store_true", help="also trace the engine's Python allocations"
    )
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[],
        help="also attribute the month in N parts (e.g. --workers 1 2 4): work per part, "
        "critical path, and with CELERY_BROKER_URL and PostgreSQL a chord on N worker processes",
    )  # fmt: skip
    parser.add_argument(
        "--skip-whole", action="store_true", help="skip timing load and engine alone (big months)"
    )
    parser.add_argument(
        "--copy", action="store_true", help="load the month with COPY (PostgreSQL; big months)"
    )
    parser.add_argument(
        "--split-only", action="store_true",
        help="with --workers: only the month in parts (no attribute command, no whole month)",
    )  # fmt: skip
    parser.add_argument(
        "--tile", type=int, default=1,
        help="build nodes/TILE and jobs/TILE, then copy them TILE times on the server",
    )  # fmt: skip
    # orm: the Python generator (the month the earlier figures are about); sql: the same shape
    # generated by PostgreSQL (bench/month_sql.py), for the goal sizes (PostgreSQL only).
    parser.add_argument("--generator", choices=["orm", "sql"], default="orm")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-workers", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child_workers:
        _setup_django(args.database_url, broker=True)
        from attribution_parts import measure

        print(json.dumps({"workers": measure(MONTH, args.workers, whole=not args.split_only)}))
        return
    if args.child:
        _setup_django(args.database_url)
        print(json.dumps(_child(args)))
        return

    backend = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite (temp file)"
    if args.generator == "sql" and not os.environ.get("DATABASE_URL"):
        raise SystemExit("--generator sql needs DATABASE_URL on PostgreSQL")
    print(f"attribution benchmark on {backend}, month {month_format(MONTH)} ({HOURS} hours)")
    base = _run_size(args.nodes, args.jobs, args)
    _print(base)
    if args.no_double or args.split_only:
        return
    double = _run_size(2 * args.nodes, 2 * args.jobs, args)
    _print(double)
    ratio = double["attribute_s"] / base["attribute_s"]
    engine_ratio = double["engine_s"] / base["engine_s"]
    baseline_ratio = double["baseline_read_s"] / base["baseline_read_s"]
    verdict = "ok" if ratio <= 2.3 else "ABOVE TARGET"
    print(
        f"2N/2J vs N/J: attribute {ratio:.2f}x (target <= 2.3: {verdict}), engine "
        f"{engine_ratio:.2f}x, baseline read {baseline_ratio:.2f}x"
    )


if __name__ == "__main__":
    main()
