"""`bench/attribution.py --workers N ...`: the month attributed in N parts.

Run by bench/attribution.py in a child process on the month it built (same scratch database).
For each N it measures, one after another (so each figure is the work itself, not the 2-core
machine's contention), each in a fresh process of its own as on a worker: the plan, each part
(attribution_month_part: load its line items and the jobs on its nodes, first pass, sums), and
the reduce (merge, spread idle, shared costs, conservation check, write the ledger and
rollups): wall, CPU and peak RSS of each. The critical path is plan + the longest part + reduce:
what N workers would take on N free cores. With CELERY_BROKER_URL and PostgreSQL it then starts
a real Celery worker with N processes on the attribution queue and times the chord end to end
(month_step.attribution_month_split) on this machine.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import resource
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


def measure(month: dt.date, workers: list[int], *, whole: bool = True) -> dict[str, Any]:
    """whole: first attribute the month in one process (the baseline of the speed-up)."""
    from django.db import connection

    from finops.attribution import services

    result: dict[str, Any] = {"whole_s": None, "runs": []}
    if whole:
        began = time.perf_counter()
        services.attribution_month_run(month=month)
        result["whole_s"] = time.perf_counter() - began
    real = bool(os.environ.get("CELERY_BROKER_URL")) and connection.vendor == "postgresql"
    for n in workers:
        run = _in_process(month, n)
        if real:
            run["chord_s"] = _chord(month, n)
        result["runs"].append(run)
    return result


def _in_process(month: dt.date, n: int) -> dict[str, Any]:
    """The plan here, then each part and the reduce in a fresh child process of its own, one
    after another (_step): wall, CPU and peak RSS of each, as a worker process would have."""
    from finops.attribution import services

    began = time.perf_counter()
    plan = services.attribution_month_plan(month=month, parts=n)
    # As month_step.attribution_month_split: the month's scope read once, handed to every part.
    scope = services.attribution_month_scope(month=month, plan=plan)
    plan_s = time.perf_counter() - began
    scope_json = "" if scope is None else json.dumps(scope.state())
    load: list[float] = [os.getloadavg()[0]]
    folder = Path(tempfile.mkdtemp(prefix="bench-parts-"))
    # The split run's stage id: on PostgreSQL the parts stage their own rows (staging.py).
    stage = services.staging.stage_new(month)
    try:
        parts = []
        for index, part in enumerate(plan):
            out = folder / f"part-{index}"
            step = ["part", month.isoformat(), part.first or "", part.stop or "", str(out), stage,
                    scope_json]  # fmt: skip
            parts.append({**_step(step), "payload_mb": out.stat().st_size / 2**20})
        load.append(os.getloadavg()[0])
        reduce = _step(["reduce", month.isoformat(), stage, *(str(folder / f"part-{i}") for i in
                                                               range(len(plan)))])  # fmt: skip
        load.append(os.getloadavg()[0])
    finally:
        for file in folder.iterdir():
            file.unlink()
        folder.rmdir()
    part_s = [p["wall_s"] for p in parts]
    return {
        "workers": n, "parts": len(plan), "plan_s": plan_s, "part_s": part_s,
        "part_cpu_s": [p["cpu_s"] for p in parts], "part_rss_mb": [p["rss_mb"] for p in parts],
        "part_jobs": [p["jobs"] for p in parts], "payload_mb": [p["payload_mb"] for p in parts],
        "reduce_s": reduce["wall_s"], "reduce_cpu_s": reduce["cpu_s"],
        "reduce_rss_mb": reduce["rss_mb"], "part_server_cpu_s": [p["server_cpu_s"] for p in parts],
        "reduce_server_cpu_s": reduce["server_cpu_s"], "reduce_rows": reduce["rows"],
        "part_rows": [(p["staged_rows"], p["sent_rows"]) for p in parts],
        "critical_s": plan_s + max(part_s) + reduce["wall_s"],
        "work_s": plan_s + sum(part_s) + reduce["wall_s"], "load_avg": load,
    }  # fmt: skip


def _step(argv: list[str]) -> dict[str, Any]:
    """One part or the reduce in a child process (this file's main); its figures."""
    done = subprocess.run(
        [sys.executable, __file__, *argv], check=True, capture_output=True, text=True, cwd=ROOT
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _step_main(argv: list[str]) -> None:
    """Child: `part MONTH FIRST STOP OUT STAGE` or `reduce MONTH STAGE PART...` (DATABASE_URL
    inherited). Prints wall and CPU seconds of the work, the CPU seconds of its database server
    process (PostgreSQL on this machine), and the process's peak RSS (ru_maxrss: Django and
    all), as one worker process would show."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    os.environ.pop("CELERY_BROKER_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from finops.attribution import services
    from finops.attribution.inputs.month import MonthScope, ResourceRange
    from finops.attribution.ledger.partial import PartResult

    kind, month = argv[0], dt.date.fromisoformat(argv[1])
    server_cpu = _server_cpu()
    server_began = server_cpu()
    began, cpu = time.perf_counter(), time.process_time()
    figures: dict[str, Any] = {}
    if kind == "part":
        first, stop, out, stage = argv[2] or None, argv[3] or None, Path(argv[4]), argv[5]
        scope = MonthScope.from_state(json.loads(argv[6])) if argv[6] else None
        data = services.attribution_month_part(
            month=month, part=ResourceRange(first, stop), stage=stage, scope=scope
        )
        out.write_bytes(data)
        result = PartResult.loads(data)
        figures["jobs"] = len(result.job_meta)
        figures["staged_rows"] = result.staged.rows if result.staged is not None else 0
        figures["sent_rows"] = len(result.ledger)
    else:
        seen: list[int] = []
        reduce = services.month_ledger_reduce

        def counted(parts: Any) -> Any:  # the rows the reduce merged and wrote itself
            reduced = reduce(parts)
            seen.append(len(reduced.ledger))
            return reduced

        services.month_ledger_reduce = counted  # type: ignore[assignment]
        services.attribution_month_reduce(
            month=month, parts=(Path(name).read_bytes() for name in argv[3:]), stage=argv[2]
        )
        figures["rows"] = seen[0]
    figures["wall_s"] = time.perf_counter() - began
    figures["cpu_s"] = time.process_time() - cpu
    figures["server_cpu_s"] = server_cpu() - server_began
    figures["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))


def _server_cpu() -> Any:
    """A reader of the CPU seconds (user + system) of this connection's PostgreSQL backend
    (/proc of the same machine); 0.0 when there is none (SQLite)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return lambda: 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    return read


def _chord(month: dt.date, n: int) -> float:
    """The chord on a real worker with n processes (prefork) over the configured broker."""
    from django.db import connection

    from finops.attribution.month_step import attribution_month_split
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
        summary = attribution_month_split(month, n).get(timeout=3600)
        elapsed = time.perf_counter() - began
        if summary["status"] != "succeeded":
            raise RuntimeError(f"chord run failed: {summary}")
        return elapsed
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        log.unlink()


def _speed_up_baseline(result: dict[str, Any]) -> tuple[float | None, str]:
    """The whole month in one process, or, when that was skipped (--split-only), the 1-part run:
    the same work without the split, so the speed-up is still printed rather than 'nan'."""
    if result["whole_s"] is not None:
        return result["whole_s"], f"whole {result['whole_s']:.1f} s"
    one = [run["critical_s"] for run in result["runs"] if run["parts"] == 1]
    if one:
        return one[0], f"whole not run; speed-up against the 1-part critical path {one[0]:.1f} s"
    return None, "whole not run; no 1-part run, so no speed-up"


def _ratio(whole: float | None, critical: float) -> str:
    return "not known" if whole is None else f"{whole / critical:.2f}x"


def print_runs(result: dict[str, Any]) -> None:
    whole, label = _speed_up_baseline(result)
    print(f"  in parts (service calls; one process, one step after another; {label})")
    for run in result["runs"]:
        parts = ", ".join(f"{s:.1f}" for s in run["part_s"])
        mb = sum(run["payload_mb"])
        chord = f", chord on {run['workers']} worker processes {run['chord_s']:.1f} s" if (
            "chord_s" in run
        ) else ""  # fmt: skip
        cpu = ", ".join(f"{s:.1f}" for s in run["part_cpu_s"])
        rss = ", ".join(f"{s:.0f}" for s in run["part_rss_mb"])
        jobs = ", ".join(f"{s:,}" for s in run["part_jobs"])
        server = ", ".join(f"{s:.1f}" for s in run["part_server_cpu_s"])
        rows = ", ".join(f"{a:,}/{b:,}" for a, b in run["part_rows"])
        each_mb = ", ".join(f"{s:.1f}" for s in run["payload_mb"])
        load = ", ".join(f"{s:.1f}" for s in run["load_avg"])
        print(
            f"    {run['workers']} workers: plan {run['plan_s']:.1f} s, parts [{parts}] s "
            f"({mb:.0f} MB of results), reduce {run['reduce_s']:.1f} s; critical path "
            f"{run['critical_s']:.1f} s (projected speed-up {_ratio(whole, run['critical_s'])} on "
            f">= {run['parts']} free cores), total work {run['work_s']:.1f} s{chord}; "
            f"CPU of this process: parts [{cpu}] s, reduce {run['reduce_cpu_s']:.1f} s; "
            f"peak RSS per process: parts [{rss}] MB, reduce {run['reduce_rss_mb']:.0f} MB; "
            f"jobs in each part's results [{jobs}]; CPU of the database server process: parts "
            f"[{server}] s, reduce {run['reduce_server_cpu_s']:.1f} s; ledger rows staged/sent "
            f"by each part [{rows}], merged and written by the reduce {run['reduce_rows']:,}; "
            f"each part's result [{each_mb}] MB; load average "
            f"(start, after the parts, after the reduce) {load}"
        )


if __name__ == "__main__":
    _step_main(sys.argv[1:])
