"""Render demo jobs as `sacct --parsable2` output, exactly as Slurm prints it.

`sacct --parsable2 --allocations` is not used: real exports include the step lines
(`1234.batch`, `1234.extern`, `1234.0`), which parsers must skip. Times are the cluster's local
wall-clock time without an offset; `End` is `Unknown` while a job runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from finops.demo.fleet import Month
from finops.demo.jobs import Job

SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "Account",
    "User",
    "Partition",
    "State",
    "Start",
    "End",
    "AllocTRES",
    "NodeList",
    "WCKey",
    "Comment",
)


def compress_hostlist(hosts: Iterable[str]) -> str:
    """`aws-p5-001,aws-p5-002,aws-p5-004` -> `aws-p5-[001-002,004]` (Slurm hostlist syntax)."""
    groups: dict[str, list[str]] = {}
    for host in sorted(hosts):
        prefix, _, number = host.rpartition("-")
        groups.setdefault(prefix, []).append(number)
    parts: list[str] = []
    for prefix, numbers in groups.items():
        if len(numbers) == 1:
            parts.append(f"{prefix}-{numbers[0]}")
            continue
        width = len(numbers[0])
        ranges: list[tuple[int, int]] = []
        for value in sorted(int(n) for n in numbers):
            if ranges and value == ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], value)
            else:
                ranges.append((value, value))
        text = ",".join(
            f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in ranges
        )
        parts.append(f"{prefix}-[{text}]")
    return ",".join(parts)


def _alloc_tres(job: Job, nodes: int, gpus_per_node: int, billing: bool = True) -> str:
    gpus = gpus_per_node * nodes
    cpus = job.cpus_per_gpu * gpus
    mem = job.mem_gib_per_gpu * gpus
    parts = [f"billing={cpus}"] if billing else []
    parts += [
        f"cpu={cpus}",
        f"gres/gpu:{job.gpu_model}={gpus}",
        f"gres/gpu={gpus}",
        f"mem={mem}G",
        f"node={nodes}",
    ]
    return ",".join(parts)


class _Clock:
    def __init__(self, month: Month, time_zone: str) -> None:
        self.base = month.start
        self.zone = ZoneInfo(time_zone)

    def local(self, seconds: int | None) -> str:
        if seconds is None:
            return "Unknown"
        moment = (self.base + timedelta(seconds=seconds)).astimezone(self.zone)
        return datetime.strftime(moment, "%Y-%m-%dT%H:%M:%S")


def _state_text(job: Job) -> str:
    if job.state == "CANCELLED" and job.cancelled_by is not None:
        return f"CANCELLED by {job.cancelled_by}"
    return job.state


def _step_state(job: Job, step: str) -> str:
    if job.state in ("RUNNING", "COMPLETED"):
        return job.state
    if step == "extern":
        return "COMPLETED"
    if job.state == "FAILED":
        return "FAILED"
    return "CANCELLED"


def _job_lines(job: Job, clock: _Clock) -> list[list[str]]:
    nodes = len(job.nodes)
    start, end = clock.local(job.start), clock.local(job.end)
    if not job.nodes:  # never started: no allocation, no steps
        return [
            [
                job.job_id,
                job.job_id_raw,
                job.name,
                job.account,
                job.user,
                job.partition,
                _state_text(job),
                start,
                end,
                "",
                "None assigned",
                job.wckey,
                job.comment,
            ]
        ]
    hostlist = compress_hostlist(job.nodes)
    lines = [
        [
            job.job_id,
            job.job_id_raw,
            job.name,
            job.account,
            job.user,
            job.partition,
            _state_text(job),
            start,
            end,
            _alloc_tres(job, nodes, job.gpus_per_node),
            hostlist,
            job.wckey,
            job.comment,
        ]
    ]
    # Steps: account only (no user or partition), the job's own times.
    first_step = "interactive" if job.interactive else "batch"
    steps = [(first_step, job.nodes[0], 1, False), ("extern", hostlist, nodes, True)]
    if nodes > 1:
        steps.append(("0", hostlist, nodes, False))
    for step, where, count, billing in steps:
        name = "torchrun" if step == "0" else step
        lines.append(
            [
                f"{job.job_id}.{step}",
                f"{job.job_id_raw}.{step}",
                name,
                job.account,
                "",
                "",
                _step_state(job, step),
                start,
                end,
                _alloc_tres(job, count, job.gpus_per_node, billing=billing),
                where,
                "",
                "",
            ]
        )
    return lines


def render_sacct(*, jobs: list[Job], month: Month, time_zone: str) -> str:
    """The text of `sacct --parsable2` for these jobs: header, then jobs and their steps."""
    clock = _Clock(month, time_zone)
    rows = ["|".join(SACCT_FIELDS)]
    for job in jobs:
        rows.extend("|".join(fields) for fields in _job_lines(job, clock))
    return "\n".join(rows) + "\n"
