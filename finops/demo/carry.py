"""Jobs and pods that cross a month end, listed again in the next month's export.

Each month of a several-month demo is scheduled on its own. A Slurm job or a pod still running
at a month's end (`End=Unknown`, phase Running) is what `sacct -S <next month> -E <its end>` and
the next month's pod list show again, now with its real end: without that, the ledger would treat
it as running for ever (JobRecord.end is None: cost to date, up to every later month's end).

The real end of a carried job or pod, in seconds from the next month's start:
- 0 when one of its nodes is not billed from that month's first second (the node left the fleet,
  or was scaled down, at the month end: the job ended with it);
- else the earliest of its planned end (Job.planned_end: the duration it was drawn with), the
  first start of a job or pod the next month's schedule placed on one of its nodes (a serving
  pod is replaced by the next month's replica), and the end of the node's first billed interval.
  The next month's schedule does not know the carried job, so ending it there keeps each GPU
  held by one job at a time;
- still running (listed again, open) when none of these falls inside the month: carried on.

A carried job that ends is listed COMPLETED (a pod Succeeded, exit code 0); an end inside the
hour repeated when DST ends (which local sacct times cannot say) moves to that hour's start.
Pure: no database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from finops.demo.fleet import Node
from finops.demo.generate_kubernetes import Pod
from finops.demo.jobs import Job


@dataclass
class StillOpen:
    """What ran past a month's end, times in seconds from that month's start."""

    seconds: int  # the month's length
    jobs: dict[str, list[Job]] = field(default_factory=dict)  # Slurm cluster -> jobs
    pods: dict[str, list[Pod]] = field(default_factory=dict)  # Kubernetes cluster -> pods


@dataclass(frozen=True)
class _NextMonth:
    """What the next month's schedule says about its nodes."""

    seconds: int
    first_start: dict[str, int]  # hostname -> first start of a job or pod placed on it
    up_until: dict[str, int]  # hostname -> end of its billed interval starting at 0
    blocked: Sequence[tuple[int, int]] = ()


def next_month(
    *, seconds: int, nodes: Iterable[Node], placed: Iterable[tuple[Sequence[str], int | None]],
    blocked: Sequence[tuple[int, int]] = (),
) -> _NextMonth:  # fmt: skip
    """`placed`: (hostnames, start) of each job or pod of the next month."""
    first: dict[str, int] = {}
    for hosts, start in placed:
        if start is None:
            continue
        for host in hosts:
            first[host] = min(first.get(host, start), start)
    up = {n.hostname: n.up[0][1] for n in nodes if n.up and n.up[0][0] == 0}
    return _NextMonth(seconds=seconds, first_start=first, up_until=up, blocked=blocked)


def _real_end(hosts: Sequence[str], planned: int | None, after: _NextMonth) -> int | None:
    """Seconds from the next month's start, or None: still running at its end."""
    if any(host not in after.up_until for host in hosts):
        return 0
    ends = [after.up_until[host] for host in hosts]
    ends += [after.first_start[host] for host in hosts if host in after.first_start]
    if planned is not None:
        ends.append(planned)
    end = min(ends)
    if end >= after.seconds:
        return None
    for low, high in after.blocked:
        if low <= end < high:
            return low
    return end


def _shifted(value: int | None, by: int) -> int | None:
    return None if value is None else value - by


def jobs_carried(jobs: list[Job], *, shift: int, after: _NextMonth) -> list[Job]:
    """The previous month's open jobs as the next month's sacct lists them."""
    carried = []
    for job in jobs:
        assert job.start is not None
        planned = _shifted(job.planned_end, shift)
        end = _real_end(job.nodes, planned, after)
        state = "RUNNING" if end is None else "COMPLETED"
        carried.append(
            replace(job, start=job.start - shift, end=end, state=state, planned_end=planned,
                    requeue_of=None)
        )  # fmt: skip
    return carried


def pods_carried(pods: list[Pod], *, shift: int, after: _NextMonth) -> list[Pod]:
    """The previous month's running pods as the next month's pod list shows them."""
    carried = []
    for pod in pods:
        assert pod.start is not None and pod.node is not None
        planned = _shifted(pod.planned_end, shift)
        end = _real_end([pod.node], planned, after)
        restart = _shifted(pod.restart_at, shift)
        if end is None:
            carried.append(
                replace(pod, start=pod.start - shift, planned_end=planned, restart_at=restart)
            )
            continue
        carried.append(
            replace(
                pod, start=pod.start - shift, end=end, phase="Succeeded", reason="",
                exit_code=0, terminated_reason="Completed", disrupted=False,
                planned_end=planned, restart_at=restart,
            )
        )  # fmt: skip
    return carried


def still_open(
    *, seconds: int, jobs: dict[str, list[Job]], pods: dict[str, list[Pod]]
) -> StillOpen:
    """The started jobs and pods of a month's exports (carried ones included) with no end."""
    return StillOpen(
        seconds=seconds,
        jobs={
            cluster: [j for j in listed if j.end is None and j.start is not None and j.nodes]
            for cluster, listed in jobs.items()
        },
        pods={cluster: [p for p in listed if _open_pod(p)] for cluster, listed in pods.items()},
    )


def _open_pod(pod: Pod) -> bool:
    return pod.phase == "Running" and pod.end is None and pod.start is not None and bool(pod.node)
