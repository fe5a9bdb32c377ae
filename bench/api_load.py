"""API load: 20 concurrent clients against gunicorn over PostgreSQL.

    python bench/api_load.py --line-items 1000000              # build a month, then load it
    python bench/api_load.py --reuse                           # load the month built before
    python bench/api_load.py --reuse --worker-class sync --threads 1 --gunicorn-workers 5

Builds one month with bench/attribution.py's generator (N 8-GPU nodes x 744 hourly line items,
200 Slurm jobs per node over 20 teams, storage and support lines; `--line-items` picks N) in
`--database-url` (created and migrated when missing; never `finops` or a `test_` database),
loading line items and jobs with COPY, attributes it (ledger and rollups), makes a budget per
team and one for the organisation, a finance user and a team lead with API tokens, then runs
gunicorn (gthread, a process per core, 4 threads: docs/running-at-scale.md) on a free
loopback port twice, each time driving `--clients` concurrent keep-alive
clients for `--duration` seconds:

    cache off  FINOPS_API_CACHE_SECONDS=0: every answer computed (the baseline)
    cache on   answers cached in Redis (`--cache-url`), keyed by data version and scope

Each client cycles through the requests below. Prints p50 / p95 / p99 and requests/s per
request and phase, and the ratio cache off / cache on (same run, same machine).

    summary  a team's month (the lead's token): /costs/?month=&interval=month&group_by=category
    runs     the runs list, paged: /runs/?month=&limit=100&offset=<random page>
    series   the daily cost series of every team (finance): /costs/?group_by=team&interval=day
    budgets  /budgets/?as_of=<mid-month> (finance): 21 budgets with actual and forecast
    root     /api/v1/ (finance): no data read, the floor of an authenticated request
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from importlib import util as import_util
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/finops_apiload"
MONTH = "2025-01"
TEAMS = 20
JOBS_PER_NODE = 200  # as the 100-node, 20,000-job month measured before
RUNS_PAGES = 10  # the runs request asks for one of the first 10 pages of 100
OTHER_LINES = 31 * 11  # storage (10 teams) and support lines per day of the month


def _bench_module(name: str) -> Any:
    """bench/<name>.py (bench/ is scripts, not a package)."""
    spec = import_util.spec_from_file_location(f"bench_{name}", ROOT / f"bench/{name}.py")
    assert spec and spec.loader
    module = import_util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ensure_database(url: str) -> None:
    import psycopg

    prefix, _, name = url.rpartition("/")
    name = name.split("?", 1)[0]
    if name == "finops" or name.startswith("test_"):
        raise SystemExit(f"refusing to load into {name}: the bench deletes its data")
    with psycopg.connect(f"{prefix}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    os.environ.pop("CELERY_BROKER_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _copy_bulk_create(model: Any) -> Any:
    """A stand-in for `model.objects.bulk_create` that loads the rows with COPY (the issue asks
    the bench's month be loaded that way: bulk_create's INSERTs take hours at 10M rows)."""
    from django.db import connection

    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(model._meta.db_table)

    def bulk_create(instances: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy,
        ):
            for obj in instances:
                copy.write_row(
                    [f.get_db_prep_save(getattr(obj, f.attname), connection) for f in fields]
                )
        return instances

    return bulk_create


def _month_sql() -> Any:
    return _bench_module("month_sql")


def _build(
    nodes: int, jobs: int, seed: int, *, attribute: bool = True, generator: str = "orm"
) -> dict[str, Any]:
    from unittest import mock

    from django.core.management import call_command
    from django.db import connection

    from billing_ingest.models import CostLineItem, JobRecord
    from finops.org.models import MappingRule, Team

    with connection.cursor() as cursor:  # a fresh month each build
        cursor.execute(
            "TRUNCATE billing_ingest_costlineitem, billing_ingest_jobrecord, "
            "attribution_allocatedcost, attribution_teamdailycost, attribution_runcost, "
            "budgets_budget, org_mappingrule, org_team, billing_ingest_importbatch CASCADE"
        )
    for k in range(TEAMS):
        team = Team.objects.create(slug=f"team-{k}", name=f"Team {k}")
        MappingRule.objects.create(kind="slurm_account", value=team.slug, team=team)
    began = time.perf_counter()
    if generator == "sql":
        built = _month_sql().build_month_sql(nodes, jobs, seed)
    else:
        with (
            mock.patch.object(CostLineItem.objects, "bulk_create", _copy_bulk_create(CostLineItem)),
            mock.patch.object(JobRecord.objects, "bulk_create", _copy_bulk_create(JobRecord)),
        ):
            built = _bench_module("attribution_month").build_month(nodes, jobs, seed)
    built["load_s"] = time.perf_counter() - began
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    built["attribute_s"] = 0.0
    if attribute:
        began = time.perf_counter()
        call_command("attribute", "--month", MONTH, verbosity=0)
        built["attribute_s"] = time.perf_counter() - began
    return built


def _budgets() -> None:
    """A monthly budget per team and one for the organisation, made by the service."""
    from django.contrib.auth.models import User

    from finops.budgets.models import Budget
    from finops.budgets.services import budget_create

    Budget.objects.all().delete()
    finance = User.objects.get(username="bench-finance")
    for k in range(TEAMS):
        data = {"name": f"team-{k} GPUs", "team": f"team-{k}", "amount": "400000"}
        budget_create(user=finance, data={**data, "period": "month", "currency": "USD"})
    budget_create(
        user=finance,
        data={"name": "Organisation", "team": None, "amount": "9000000", "currency": "USD"},
    )


def _users() -> dict[str, str]:
    """Tokens (made anew each run) of a finance user and of team-0's lead."""
    from django.contrib.auth.models import User

    from finops.org.models import Profile, Team
    from finops.tokens.services import api_token_create

    keys = {}
    for name, role in (("bench-finance", "finance"), ("bench-lead", "team_lead")):
        user, _ = User.objects.get_or_create(username=name)
        profile, _ = Profile.objects.get_or_create(user=user, defaults={"role": role})
        if role == "team_lead":
            profile.teams.set([Team.objects.get(slug="team-0")])
        keys[role] = api_token_create(user=user, name="api_load", read_only=True).key
    return keys


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_gunicorn(url: str, port: int, args: argparse.Namespace, cache_on: bool) -> Any:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
    env.pop("CELERY_BROKER_URL", None)
    env["CACHE_URL"] = args.cache_url
    env["FINOPS_API_CACHE_SECONDS"] = "300" if cache_on else "0"
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")), "finops.wsgi",
            "--bind", f"127.0.0.1:{port}", "--workers", str(args.gunicorn_workers),
            "--threads", str(args.threads), "--worker-class", args.worker_class,
            "--keep-alive", "30", "--log-level", "warning",
        ],
        cwd=ROOT, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server
        except OSError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("gunicorn did not start")


class Client(threading.Thread):
    def __init__(self, port: int, plan: list[tuple[str, str, str]], until: float, seed: int):
        super().__init__(daemon=True)
        self.port, self.plan, self.until = port, plan, until
        self.rng = random.Random(seed)
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        i = self.rng.randrange(len(self.plan))
        while time.monotonic() < self.until:
            kind, path, key = self.plan[i % len(self.plan)]
            i += 1
            path = path.replace("{offset}", str(self.rng.randrange(RUNS_PAGES) * 100))
            began = time.perf_counter()
            try:
                conn.request("GET", path, headers={"Authorization": f"Token {key}"})
                response = conn.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                self.errors[kind] += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                continue
            elapsed = time.perf_counter() - began
            if response.status != 200:
                self.errors[kind] += 1
            else:
                self.samples[kind].append(elapsed)


def _get_json(port: int, path: str, key: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Authorization": f"Token {key}"})
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"null")


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _phase(
    args: argparse.Namespace, plan: list[tuple[str, str, str]], cache_on: bool
) -> tuple[dict[str, list[float]], dict[str, int], float]:
    """One gunicorn, warmed up (each request once), then the clients for --duration s."""
    port = _free_port()
    server = _start_gunicorn(args.database_url, port, args, cache_on)
    try:
        # Warm up: every URL the clients will ask for once (each runs page), and check each
        # answers. With the cache on, the phase then measures the steady state, all hits; a
        # page left cold would be computed in the middle of it (1.5 s for a runs page of a
        # 10M-line month) and held other requests behind it.
        for kind, path, key in plan:
            for offset in range(0, RUNS_PAGES * 100, 100) if "{offset}" in path else [0]:
                status, _ = _get_json(port, path.replace("{offset}", str(offset)), key)
                assert status == 200, (kind, status)
        until = time.monotonic() + args.duration
        began = time.perf_counter()
        samples, errors = _drive(args, port, plan, until)
        elapsed = time.perf_counter() - began
    finally:
        server.terminate()
        server.wait(timeout=30)
    return samples, errors, elapsed


def _client_process(
    port: int, plan: list[tuple[str, str, str]], until: float, seeds: list[int], out: Any
) -> None:
    """One client process: a thread per client, the samples sent back when they end."""
    clients = [Client(port, plan, until, seed) for seed in seeds]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    samples: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for client in clients:
        for kind, values in client.samples.items():
            samples[kind].extend(values)
        for kind, count in client.errors.items():
            errors[kind] += count
    out.put((dict(samples), dict(errors)))


def _drive(
    args: argparse.Namespace, port: int, plan: list[tuple[str, str, str]], until: float
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """The clients, spread over --client-processes processes: 20 threads in one Python process
    would wait for each other's GIL, and that wait would show in the latencies as if it were
    the server's."""
    fork = multiprocessing.get_context("fork")
    queue: Any = fork.Queue()
    processes = []
    count = max(1, min(args.client_processes, args.clients))
    for n in range(count):
        seeds = [args.seed + c for c in range(n, args.clients, count)]
        process = fork.Process(target=_client_process, args=(port, plan, until, seeds, queue))
        process.start()
        processes.append(process)
    samples: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, int] = defaultdict(int)
    for _ in processes:
        part_samples, part_errors = queue.get()
        for kind, values in part_samples.items():
            samples[kind].extend(values)
        for kind, errors_count in part_errors.items():
            errors[kind] += errors_count
    for process in processes:
        process.join()
    return samples, errors


def _figures(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (float("nan"),) * 3
    p50, p95, p99 = (1000 * _percentile(values, q) for q in (50, 95, 99))
    return p50, p95, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL") or DEFAULT_DATABASE
    )
    parser.add_argument(
        "--line-items",
        type=int,
        default=75_000,
        help="size of the month (nodes = line items / 744)",
    )
    parser.add_argument("--jobs", type=int, help=f"default {JOBS_PER_NODE} per node")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reuse", action="store_true", help="load the month built before")
    # A month too large for one process is built here, attributed another way (in parts:
    # bench/attribution_parts.py), then loaded with --reuse.
    parser.add_argument("--build-only", action="store_true", help="build the month and stop")
    # orm: bench/attribution.py's generator through COPY (the month its figures are about);
    # sql: the same shape generated by PostgreSQL (bench/month_sql.py), for 10M line items.
    parser.add_argument("--generator", choices=["orm", "sql"], default="orm")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument(
        "--client-processes", type=int, default=4,
        help="processes the clients' threads are spread over (1: all in this one)",
    )  # fmt: skip
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load per phase")
    # The configuration of docs/running-at-scale.md: one gthread process per core, 4 threads.
    parser.add_argument("--gunicorn-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--worker-class", default="gthread", choices=["sync", "gthread"])
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--cache-url", default="redis://127.0.0.1:6379/6")
    parser.add_argument("--phases", default="off,on", help="cache off, on, or both (off,on)")
    parser.add_argument(
        "--requests", default="summary,runs,series,budgets,root", help="which requests to drive"
    )
    args = parser.parse_args()  # fmt: skip
    if not urlsplit(args.database_url).scheme.startswith("postgres"):
        raise SystemExit("PostgreSQL only (the load is measured on the real server)")

    _ensure_database(args.database_url)
    _setup_django(args.database_url)
    from billing_ingest.models import CostLineItem
    from finops.attribution.models import AllocatedCost, RunCost, TeamDailyCost
    from finops.budgets.models import Budget

    if not args.reuse:
        nodes = max(1, round((args.line_items - OTHER_LINES) / 744))
        jobs = args.jobs or JOBS_PER_NODE * nodes
        built = _build(
            nodes, jobs, args.seed, attribute=not args.build_only, generator=args.generator
        )
        print(
            f"{nodes} nodes, {jobs:,} jobs: loaded ({args.generator}) in {built['load_s']:.1f} s, "
            f"attributed in {built['attribute_s']:.1f} s"
        )
        if args.build_only:
            return
    keys = _users()
    if args.reuse is False or not Budget.objects.exists():
        _budgets()
    sizes = {
        "line items": CostLineItem.objects.count(),
        "ledger rows": AllocatedCost.objects.count(),
        "TeamDailyCost rows": TeamDailyCost.objects.count(),
        "RunCost rows": RunCost.objects.count(),
        "budgets": Budget.objects.count(),
    }
    print(", ".join(f"{k}: {v:,}" for k, v in sizes.items()))

    plan = [
        ("summary", f"/api/v1/costs/?month={MONTH}&interval=month&group_by=category",
         keys["team_lead"]),
        ("runs", f"/api/v1/runs/?month={MONTH}&limit=100&offset={{offset}}", keys["finance"]),
        ("series", f"/api/v1/costs/?month={MONTH}&group_by=team&interval=day", keys["finance"]),
        ("budgets", f"/api/v1/budgets/?as_of={MONTH}-20", keys["finance"]),
        ("root", "/api/v1/", keys["finance"]),
    ]  # fmt: skip
    wanted = {r.strip() for r in args.requests.split(",")}
    plan = [entry for entry in plan if entry[0] in wanted]
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    results = {}
    for phase in phases:
        samples, errors, elapsed = _phase(args, plan, cache_on=phase == "on")
        results[phase] = samples
        total = sum(len(v) for v in samples.values())
        print(
            f"\ncache {phase}: {args.clients} clients in {args.client_processes} processes, "
            f"{elapsed:.1f} s, gunicorn "
            f"{args.gunicorn_workers} {args.worker_class} workers x {args.threads} threads, "
            f"{os.cpu_count()} cores"
        )
        print(
            f"{'request':<10}{'n':>7}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'req/s':>8}"
            f"{'errors':>8}"
        )
        for kind, *_ in plan:
            values = samples[kind]
            p50, p95, p99 = _figures(values)
            rate = len(values) / elapsed
            print(
                f"{kind:<10}{len(values):>7}{p50:>10.1f}{p95:>10.1f}{p99:>10.1f}{rate:>8.1f}"
                f"{errors[kind]:>8}"
            )
        print(f"throughput: {total / elapsed:.1f} requests/s ({total} requests)")
    if {"off", "on"} <= set(results):
        print("\nratio cache off / cache on (p95; above 1: the cache is faster)")
        for kind, *_ in plan:
            off, on = _figures(results["off"][kind])[1], _figures(results["on"][kind])[1]
            print(f"{kind:<10}{off / on:>8.1f}x")


if __name__ == "__main__":
    main()
