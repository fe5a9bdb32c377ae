"""`bench/attribution.py --workers N ...`: the month attributed in N parts.

Run by bench/attribution.py in a child process on the month it built (same scratch database).
For each N it measures, in this process and one after another (so each figure is the work
itself, not the 2-core machine's contention): the plan, each part (attribution_month_part: load
its line items and all the jobs, first pass, sums), and the reduce (merge, spread idle, shared
costs, conservation check, write the ledger and rollups). The critical path is plan + the longest
part + reduce: what N workers on N free cores would take. With CELERY_BROKER_URL and PostgreSQL
it then starts a real Celery worker with N processes on the attribution queue and times the
chord end to end (tasks.attribution_month_split) on this machine.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol, cast

ROOT = Path(__file__).resolve().parent.parent


class _PurgeableChannel(Protocol):
    """The Redis/AMQP channel's purge (kombu's stubs type the default channel without it)."""

    def queue_purge(self, queue: str) -> int | None: ...


def measure(month: dt.date, workers: list[int]) -> dict[str, Any]:
    from django.db import connection

    from finops.attribution import services

    began = time.perf_counter()
    services.attribution_month_run(month=month)
    result: dict[str, Any] = {"whole_s": time.perf_counter() - began, "runs": []}
    real = bool(os.environ.get("CELERY_BROKER_URL")) and connection.vendor == "postgresql"
    for n in workers:
        run = _in_process(month, n)
        if real:
            run["chord_s"] = _chord(month, n)
        result["runs"].append(run)
    return result


def _in_process(month: dt.date, n: int) -> dict[str, Any]:
    from finops.attribution import services

    began = time.perf_counter()
    plan = services.attribution_month_plan(month=month, parts=n)
    plan_s = time.perf_counter() - began
    part_s: list[float] = []
    # CPU seconds of this process: less sensitive than wall time to a shared machine, but
    # blind to the database server's share (the reduce's COPY).
    part_cpu: list[float] = []
    sizes: list[int] = []
    payloads: list[bytes] = []
    for part in plan:
        began, cpu = time.perf_counter(), time.process_time()
        payloads.append(services.attribution_month_part(month=month, part=part))
        part_s.append(time.perf_counter() - began)
        part_cpu.append(time.process_time() - cpu)
        sizes.append(len(payloads[-1]))
    began, cpu = time.perf_counter(), time.process_time()
    services.attribution_month_reduce(month=month, parts=payloads)
    reduce_s = time.perf_counter() - began
    return {
        "workers": n, "parts": len(plan), "plan_s": plan_s, "part_s": part_s,
        "part_cpu_s": part_cpu, "reduce_cpu_s": time.process_time() - cpu,
        "payload_mb": [size / 2**20 for size in sizes], "reduce_s": reduce_s,
        "critical_s": plan_s + max(part_s) + reduce_s, "work_s": plan_s + sum(part_s) + reduce_s,
    }  # fmt: skip


def _chord(month: dt.date, n: int) -> float:
    """The chord on a real worker with n processes (prefork) over the configured broker."""
    from django.db import connection

    from finops.attribution.tasks import attribution_month_split
    from finops.celery import app

    with app.connection_for_write() as broker:
        cast(_PurgeableChannel, broker.default_channel).queue_purge("attribution")
    db = connection.settings_dict
    env = dict(os.environ)
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )
    node = f"bench-{n}-{os.getpid()}@{socket.gethostname()}"
    log = Path(tempfile.mkstemp(prefix="bench-worker-", suffix=".log")[1])
    with log.open("ab") as handle:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "finops", "worker", "-c", str(n),
             "-Q", "attribution", "-n", node, "--without-gossip", "--without-mingle",
             "--loglevel=WARNING"],
            cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(node in reply for reply in app.control.ping(timeout=1.0) or []):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start:\n{log.read_text()}")
        began = time.perf_counter()
        summary = attribution_month_split(month.strftime("%Y-%m"), n).get(timeout=3600)
        elapsed = time.perf_counter() - began
        if summary["status"] != "succeeded":
            raise RuntimeError(f"chord run failed: {summary}")
        return elapsed
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.unlink()


def print_runs(result: dict[str, Any]) -> None:
    whole = result["whole_s"]
    print(f"  in parts (service calls; one process, one step after another; whole {whole:.1f} s)")
    for run in result["runs"]:
        parts = ", ".join(f"{s:.1f}" for s in run["part_s"])
        mb = sum(run["payload_mb"])
        chord = f", chord on {run['workers']} worker processes {run['chord_s']:.1f} s" if (
            "chord_s" in run
        ) else ""  # fmt: skip
        cpu = ", ".join(f"{s:.1f}" for s in run["part_cpu_s"])
        print(
            f"    {run['workers']} workers: plan {run['plan_s']:.1f} s, parts [{parts}] s "
            f"({mb:.0f} MB of results), reduce {run['reduce_s']:.1f} s; critical path "
            f"{run['critical_s']:.1f} s (projected speed-up {whole / run['critical_s']:.2f}x on "
            f">= {run['parts']} free cores), total work {run['work_s']:.1f} s{chord}; "
            f"CPU of this process: parts [{cpu}] s, reduce {run['reduce_cpu_s']:.1f} s"
        )
