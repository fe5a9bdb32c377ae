"""`manage.py demo` timed against a baseline, and its figures compared (issue 29: `make demo`
under 3 minutes after install, no figure changed by a speed-up).

    .venv/bin/python bench/demo.py --baseline-ref main            # six months, both at once
    .venv/bin/python bench/demo.py --baseline-ref HEAD~3 --months 2 --scale small

The working tree and the baseline (`git archive` of --baseline-ref into --work, sharing this
.venv) each build the demo from a freshly migrated SQLite database of their own under --work,
side by side (the same load on both: the ratio is what to read on a shared machine; --serial
runs them one after the other). Prints per tree: wall and user+system CPU seconds of the demo
(its month-building worker included) and peak RSS, the seconds of each pipeline step summed
over the months (PipelineStep start to end) and of each import format (batch created to
finished); then the ratio current / baseline of each. With --compare (default) both databases
are dumped by scripts/demo_dump.py and diffed: every table must read "same".
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS_SQL = (
    "SELECT s.key, SUM((julianday(s.finished_at) - julianday(s.started_at)) * 86400) "
    "FROM pipeline_pipelinestep s GROUP BY s.key"
)
IMPORTS_SQL = (
    "SELECT format, SUM((julianday(finished_at) - julianday(created_at)) * 86400) "
    "FROM billing_ingest_importbatch GROUP BY format"
)


@dataclass
class Result:
    name: str
    wall: float = 0.0
    cpu: float = 0.0
    rss_mb: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)


def _tree(ref: str, work: Path) -> Path:
    """The baseline's files (git archive of ref), with this checkout's .venv."""
    target = work / "baseline"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    (target / ".venv").symlink_to((ROOT / ".venv").resolve())
    return target


def _env(tree: Path, work: Path, name: str) -> dict[str, str]:
    env = dict(os.environ)
    env["DATABASE_URL"] = f"sqlite:///{work / name}.sqlite3"
    env["FINOPS_DATA_DIR"] = str(work / f"var-{name}")
    env.pop("CELERY_BROKER_URL", None)  # tasks run in the process, as `make demo` runs them
    return env


def _start(tree: Path, work: Path, name: str, demo_args: list[str]) -> subprocess.Popen[bytes]:
    db = work / f"{name}.sqlite3"
    db.unlink(missing_ok=True)
    shutil.rmtree(work / f"var-{name}", ignore_errors=True)
    env = _env(tree, work, name)
    python = str(tree / ".venv" / "bin" / "python")
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput"],
        cwd=tree, env=env, check=True, capture_output=True,
    )  # fmt: skip
    # /usr/bin/time -v: the demo's own CPU and peak RSS (its month-building worker included).
    log = (work / f"{name}.log").open("w")
    return subprocess.Popen(
        ["/usr/bin/time", "-v", python, "manage.py", "demo", *demo_args],
        cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _clock(text: str) -> float:
    """`/usr/bin/time`'s h:mm:ss or m:ss.ss in seconds."""
    seconds = 0.0
    for part in text.strip().split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def _finish(name: str, work: Path, process: subprocess.Popen[bytes]) -> Result:
    if process.wait() != 0:
        sys.exit(f"{name}: demo failed, see {work / name}.log")
    result = Result(name)
    for line in (work / f"{name}.log").read_text().splitlines():
        line = line.strip()
        if line.startswith("Elapsed (wall clock) time"):
            result.wall = _clock(line.split("):", 1)[1])
        elif line.startswith(("User time (seconds):", "System time (seconds):")):
            result.cpu += float(line.rsplit(":", 1)[1])
        elif line.startswith("Maximum resident set size (kbytes):"):
            result.rss_mb = int(line.rsplit(":", 1)[1]) / 1024
    with sqlite3.connect(f"file:{work / name}.sqlite3?mode=ro", uri=True) as db:
        for key, seconds in db.execute(STEPS_SQL):
            result.parts[f"step {key}"] = seconds or 0.0
        for fmt, seconds in db.execute(IMPORTS_SQL):
            result.parts[f"import {fmt}"] = seconds or 0.0
    return result


def _ratio(now: float, before: float) -> str:
    return f"{now / before:5.2f}" if before else "    -"


def _print(results: list[Result]) -> None:
    names = [r.name for r in results]
    print(
        f"{'':<28}" + "".join(f"{n:>12}" for n in names) + ("   ratio" if len(results) > 1 else "")
    )
    rows: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(results))
    for i, r in enumerate(results):
        rows["demo wall s"][i] = r.wall
        rows["demo user+sys CPU s"][i] = r.cpu
        rows["demo peak RSS MB"][i] = r.rss_mb
        for key, seconds in r.parts.items():
            rows[f"  {key} s"][i] = seconds
    for label, values in rows.items():
        ratio = f"   {_ratio(values[0], values[-1])}" if len(values) > 1 else ""
        print(f"{label:<28}" + "".join(f"{v:>12,.1f}" for v in values) + ratio)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-ref", help="git ref to compare with (none: time this tree)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-demo"))
    parser.add_argument("--month", default="2026-10", help="last month built (fixed: comparable)")
    parser.add_argument("--months", default="6")
    parser.add_argument("--scale", default="full")
    parser.add_argument("--serial", action="store_true", help="one tree after the other")
    parser.add_argument("--no-compare", dest="compare", action="store_false")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    demo_args = ["--month", args.month, "--months", args.months, "--scale", args.scale]
    trees = [("current", ROOT)]
    if args.baseline_ref:
        trees.append(("baseline", _tree(args.baseline_ref, args.work)))
    print(f"load average before: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)", flush=True)
    results = []
    if args.serial:
        for name, tree in trees:
            results.append(_finish(name, args.work, _start(tree, args.work, name, demo_args)))
    else:
        started = [(name, _start(tree, args.work, name, demo_args)) for name, tree in trees]
        results = [_finish(name, args.work, process) for name, process in started]
    print(f"load average after: {os.getloadavg()[0]:.1f}; children's CPU "
          f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime:,.1f} s")  # fmt: skip
    _print(results)
    if args.compare and len(results) > 1:
        dumps = []
        for name, tree in trees:
            dump = args.work / f"{name}.dump"
            subprocess.run(
                [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "scripts" / "demo_dump.py"),
                 str(dump)],
                cwd=ROOT, env=_env(tree, args.work, name), check=True,
            )  # fmt: skip
            dumps.append(str(dump))
        diff = [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "scripts" / "demo_dump.py")]
        return subprocess.run([*diff, "--diff", *dumps], check=False).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
