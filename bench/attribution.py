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
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from attribution_month import (
    HOURS,
    MONTH,
    build_month,
    build_month_copy,
    build_month_sql,
    tile_month,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


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
        build_month_sql
        if args.generator == "sql"
        else (build_month_copy if args.copy else build_month)
    )
    if args.tile > 1:
        result.update(build(args.nodes // args.tile, args.jobs // args.tile, args.seed))
        result.update(tile_month(args.tile))
    else:
        result.update(build(args.nodes, args.jobs, args.seed))
    result["rss_after_build_mb"] = _maxrss_mb()
    if args.split_only:
        from billing_ingest.models import CostLineItem

        result["line_items"] = CostLineItem.objects.count()
        return result

    from billing_ingest.models import CostLineItem

    result["line_items"] = CostLineItem.objects.count()
    result["baseline_read_s"] = _time_baseline()
    result["engines"] = {}
    digests = {}
    for engine_name in args.engines:
        result["engines"][engine_name], digests[engine_name] = _engine_run(engine_name, args)
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        from columnar_baseline import columnar_month

        result["columnar"] = columnar_month(MONTH)
    # Row by row: every ledger row (all columns but the id) and every first-pass row alike.
    first = args.engines[0]
    result["identical"] = {
        name: digests[name] == digests[first] for name in args.engines if name != first
    }
    return result


def _ledger_digest() -> tuple[str, int]:
    """A digest of the month's ledger rows as stored, sorted (the ids are left out: they are
    the order rows were written in, not what they say)."""
    import hashlib

    from finops.attribution.models import AllocatedCost

    names = [f.attname for f in AllocatedCost._meta.concrete_fields if not f.primary_key]
    rows = sorted(map(repr, AllocatedCost.objects.values_list(*names).iterator(chunk_size=20000)))
    return hashlib.sha256("\n".join(rows).encode()).hexdigest(), len(rows)


def _run_phases() -> list[tuple[str, float]]:
    """The seconds per phase the month's latest attribution run recorded (AttributionRun.phases,
    as `attribute --month` reads them)."""
    from finops.attribution.selectors.ledger import attribution_run_latest

    run = attribution_run_latest(month=MONTH)
    return [] if run is None else [(name, seconds) for name, seconds in run.phases]


def _pipeline_steps() -> dict[str, float]:
    """Seconds of each step of the latest pipeline run (`attribute --month` runs the month's
    whole pipeline: the attribution step, then run economics, budgets, anomalies ...)."""
    from finops.pipeline.models import PipelineRun, PipelineStep

    run = PipelineRun.objects.order_by("-id").first()
    steps = PipelineStep.objects.filter(run=run).order_by("id")
    return {
        step.key: (step.finished_at - step.started_at).total_seconds()
        for step in steps
        if step.started_at is not None and step.finished_at is not None
    }


def _engine_run(engine_name: str, args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """`attribute --month` with one engine end to end, then its first pass alone with its
    phases and traced peak memory; the digests of its ledger and first-pass rows."""
    from io import StringIO

    from django.core.management import call_command
    from django.db import transaction
    from django.test import override_settings

    from finops.attribution import engine, services
    from finops.attribution.engine.vector import allocate_lines_vector
    from finops.attribution.inputs.month import inputs_load
    from finops.attribution.ledger.partial import part_of_fold
    from finops.attribution.selectors import ledger as ledger_selectors
    from finops.core.months import month_format

    result: dict[str, Any] = {}
    out = StringIO()
    with override_settings(FINOPS_ATTRIBUTION_ENGINE=engine_name):
        began = time.perf_counter()
        if args.step_only:
            # The run checks conservation before it writes (ConservationError otherwise).
            services.attribution_month_run(month=MONTH)
            out.write("difference 0")
        else:
            call_command("attribute", "--month", month_format(MONTH), stdout=out)
        result["attribute_s"] = time.perf_counter() - began
    result["rss_after_attribute_mb"] = _maxrss_mb()
    result["run_phases"] = _run_phases()
    result["steps"] = {"attribute": result["attribute_s"]} if args.step_only else _pipeline_steps()
    digest, result["ledger_rows"] = _ledger_digest()
    result["balanced"] = "difference 0" in out.getvalue()
    # The command's post-write reads (category totals and the conservation check).
    began = time.perf_counter()
    ledger_selectors.month_category_totals(month=MONTH)
    ledger_selectors.month_conservation(month=MONTH)
    result["checks_s"] = time.perf_counter() - began
    if args.skip_whole:
        return result, [digest]
    # Load and engine alone, under the same conditions as in attribution_month_run (GC paused).
    # Read as the engine reads (the vectorised one takes GPU node lines as columns).
    with (
        override_settings(FINOPS_ATTRIBUTION_ENGINE=engine_name),
        transaction.atomic(),
        services._gc_paused(),
    ):
        began = time.perf_counter()
        inputs, _ = inputs_load(month=MONTH)
        result["load_s"] = time.perf_counter() - began

    def first_pass() -> Any:
        fold = engine.ShareFold(inputs.lines)
        if engine_name == "vector":
            stats = allocate_lines_vector(
                inputs.lines, inputs.jobs, fold, horizon=inputs.horizon, block=inputs.block
            )
            result["phases"] = stats.phases
            result["vector_lines"], result["row_lines"] = stats.vector_lines, stats.row_lines
        else:
            engine.allocate_lines_into(inputs.lines, inputs.jobs, fold, horizon=inputs.horizon)
        return fold

    with services._gc_paused():
        began = time.perf_counter()
        fold = first_pass()
        result["engine_s"] = time.perf_counter() - began
        part = part_of_fold(inputs, fold)
        result["fold_s"] = time.perf_counter() - began - result["engine_s"]
    del fold
    if args.tracemalloc:  # a second, traced run (tracing slows the per-row engine down)
        tracemalloc.start()  # NumPy's buffers are traced too
        with services._gc_paused():
            first_pass()
        result["engine_traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    result["first_pass_rows"] = len(part.ledger)
    rows = [
        repr(sorted(map(repr, part.ledger.items()))),
        repr(sorted(map(repr, part.pooled.items()))),
        repr(sorted((repr(k), sorted(v.items())) for k, v in part.spread_weights.items())),
        repr(sorted((repr(k), sorted(map(repr, v.items()))) for k, v in part.pending.items())),
        repr(sorted(map(repr, part.shared))),
    ]
    return result, [digest, *rows]


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
    for flag in ("skip_whole", "copy", "split_only", "step_only"):
        if getattr(args, flag):
            command.append(f"--{flag.replace('_', '-')}")
    command += ["--tile", str(args.tile), "--generator", args.generator]
    command += ["--engines", *args.engines]
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
    if "engines" not in result:  # --split-only
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
        f"nodes {result['nodes']}, jobs {result['jobs']}: {result['line_items']} line items; "
        f"build (bulk load) {result['build_s']:.1f} s, baseline (read rows) "
        f"{result['baseline_read_s']:.1f} s"
    )
    for name, run in result["engines"].items():
        _print_engine(name, run, result["baseline_read_s"])
    if "columnar" in result:
        _print_columnar(result)
    engines = list(result["engines"].values())
    if len(engines) > 1:
        first, *others = list(result["engines"])
        for other in others:
            a, b = result["engines"][first], result["engines"][other]
            same = "IDENTICAL" if result["identical"][other] else "DIFFERENT"
            print(
                f"  {other} / {first}: attribute {b['attribute_s'] / a['attribute_s']:.2f}x"
                + (
                    f", first pass {b['engine_s'] / a['engine_s']:.2f}x"
                    if "engine_s" in a and "engine_s" in b
                    else ""
                )
                + f"; ledger and first-pass rows {same}"
            )
    if "workers" in result:
        from attribution_parts import print_runs

        print_runs(result["workers"])


def _print_columnar(result: dict[str, Any]) -> None:
    """The plain columnar baseline (columnar_baseline.py) and each engine's ratio to it."""
    base = result["columnar"]
    print(
        f"  columnar baseline: {base['rows']:,} rows, read {base['read_s']:.1f} s, split and sums "
        f"{base['split_s']:.1f} s, write {base['write_s']:.1f} s = {base['total_s']:.1f} s "
        f"(units not conserved: {base['left_units']})"
    )
    for name, run in result["engines"].items():
        step = run["steps"].get("attribute", run["attribute_s"])
        ratio = step / base["total_s"]
        whole = run["attribute_s"] / base["total_s"]
        verdict = "ok" if ratio <= 1.5 else "ABOVE TARGET"
        print(
            f"    {name}: attribution step / columnar baseline {ratio:.2f}x "
            f"(target <= 1.5: {verdict}); whole pipeline {whole:.2f}x"
        )


def _print_engine(name: str, run: dict[str, Any], baseline: float) -> None:
    print(
        f"  engine {name}: {run['ledger_rows']} ledger rows, balanced {run['balanced']}, "
        f"peak RSS {run['rss_after_attribute_mb']:.0f} MB after attribute"
    )
    print(f"    attribute --month        {run['attribute_s']:8.1f} s  "
          f"({run['attribute_s'] / baseline:.1f}x baseline)")  # fmt: skip
    steps = ", ".join(f"{key} {seconds:.1f} s" for key, seconds in run.get("steps", {}).items())
    print(f"      pipeline steps: {steps}")
    if run.get("run_phases"):
        print("      the attribution run's phases (AttributionRun.phases):")
        for phase, seconds in run["run_phases"]:
            print(f"        {phase:<22} {seconds:8.2f} s")
    print(f"    post-write checks        {run['checks_s']:8.1f} s  (totals, conservation)")
    if "engine_s" not in run:
        return
    print(f"    load inputs alone        {run['load_s']:8.1f} s")
    print(f"    first pass alone         {run['engine_s']:8.1f} s  "
          f"(+ {run['fold_s']:.1f} s rows finished, line sums)")  # fmt: skip
    for phase, seconds in run.get("phases", {}).items():
        print(f"      {phase:<22} {seconds:8.2f} s")
    if "vector_lines" in run:
        print(f"      lines on columns {run['vector_lines']}, per row {run['row_lines']}")
    rest = run["attribute_s"] - run["load_s"] - run["engine_s"] - run["checks_s"]
    print(f"    rest (reduce, write ...) {rest:8.1f} s  (attribute - load - first pass - checks)")
    if "engine_traced_peak_mb" in run:
        print(f"    first pass traced peak   {run['engine_traced_peak_mb']:8.0f} MB")


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
        "--step-only", action="store_true",
        help="time the attribution step alone (services.attribution_month_run), not the whole "
        "pipeline that `attribute --month` runs (run economics, recommendations ...)",
    )  # fmt: skip
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
    parser.add_argument(
        "--engines", nargs="+", choices=["python", "vector"], default=["python", "vector"],
        help="FINOPS_ATTRIBUTION_ENGINE values to run one after the other on the same month "
        "(the ratio is to the first; the ledgers are compared row by row)",
    )  # fmt: skip
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

    # Imported here: importing finops reads the settings, so the children (which point
    # DATABASE_URL at their scratch database first) must not import it at module level.
    from finops.core.months import month_format

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
    for name in args.engines:
        a, b = base["engines"][name], double["engines"][name]
        ratio = b["attribute_s"] / a["attribute_s"]
        verdict = "ok" if ratio <= 2.3 else "ABOVE TARGET"
        engine_ratio = (
            f", first pass {b['engine_s'] / a['engine_s']:.2f}x" if "engine_s" in a else ""
        )
        print(
            f"2N/2J vs N/J, engine {name}: attribute {ratio:.2f}x (target <= 2.3: {verdict})"
            f"{engine_ratio}, baseline read "
            f"{double['baseline_read_s'] / base['baseline_read_s']:.2f}x"
        )


if __name__ == "__main__":
    main()
