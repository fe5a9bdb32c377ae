"""A packer that schedules the demo workloads (who runs what: teams.py) onto the fleet.

The packer keeps, per node, the time from which each of its GPUs is free. A job takes the GPUs
that are free earliest, so no GPU is ever held by two jobs at once, and it starts and ends inside
one billed interval of every node it uses: jobs run only while their nodes are billed. Random idle
gaps between jobs keep utilisation in the 70-85 % range real clusters show.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from random import Random

from finops.demo.fleet import HOUR, Month, Node, Pricing, blocked_intervals
from finops.demo.jobs import Job
from finops.demo.teams import (
    ADMIN_UID,
    DEDICATED_PARTITIONS,
    SANDBOX_USERS,
    TEAM_BY_SLUG,
    WORKLOADS,
    RunKey,
    Workload,
)


@dataclass
class _Run:
    workload: Workload
    run_id: str
    user: tuple[str, int]
    remaining: int
    not_before: int = 0
    arrays: int = 0


@dataclass
class _Pending:
    """A job to place first on its partition: an array task or a restart after preemption."""

    run: _Run
    not_before: int
    array_key: str = ""
    array_index: int = -1
    restart: bool = False
    requeue_of: Job | None = None


@dataclass
class _NodeState:
    node: Node
    free: list[int]
    done: bool = False

    def ready(self, gpus: int) -> int:
        return sorted(self.free)[gpus - 1]


@dataclass
class _Cluster:
    """Scheduling state of one cluster."""

    name: str
    month_len: int
    # Intervals in which no job may start or end (the repeated local hour when DST ends).
    blocked: list[tuple[int, int]]
    nodes: list[_NodeState]
    runs: dict[str, _Run] = field(default_factory=dict)
    run_counters: dict[str, int] = field(default_factory=dict)
    pending: dict[str, list[_Pending]] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    # Run numbers start above this (months of a history never share a run id).
    run_base: int = 0
    # Preempted Slurm jobs are requeued under their JobID rather than resubmitted.
    requeue: bool = False


def _next_window(node: Node, t: int) -> tuple[int, int] | None:
    for s, e in node.up:
        if e > t:
            return max(s, t), e
    return None


def _common_window(nodes: list[_NodeState], t: int) -> tuple[int, int] | None:
    """Earliest start >= t at which all nodes are billed, and when the first of them stops."""
    for _ in range(200):
        windows = [_next_window(ns.node, t) for ns in nodes]
        if any(w is None for w in windows):
            return None
        starts = [w[0] for w in windows if w]
        if max(starts) == t:
            return t, min(w[1] for w in windows if w)
        t = max(starts)
    return None


def _in_blocked(cluster: _Cluster, t: int) -> tuple[int, int] | None:
    for s, e in cluster.blocked:
        if s <= t < e:
            return s, e
    return None


def _eligible(cluster: _Cluster, partition: str, gpu_model: str) -> list[Workload]:
    """The workloads that may run on the partition: a dedicated one runs only those naming it."""
    spot = partition.endswith("-spot")
    dedicated = partition in DEDICATED_PARTITIONS
    return [
        w
        for w in WORKLOADS
        if cluster.name in w.clusters
        and gpu_model in w.gpu_models
        and (w.spot_ok or not spot)
        and (partition in w.partitions if dedicated else not w.partitions)
    ]


def _user_for(rng: Random, workload: Workload) -> tuple[str, int]:
    if not workload.team:
        return rng.choice(SANDBOX_USERS)
    return rng.choice(TEAM_BY_SLUG[workload.team].users)


def _run_for(rng: Random, cluster: _Cluster, workload: Workload) -> _Run:
    run = cluster.runs.get(workload.base)
    if run is None or run.remaining <= 0:
        number = cluster.run_counters.get(workload.base, rng.randint(0, 4)) + 1
        cluster.run_counters[workload.base] = number
        # Run ids are unique per cluster: a run never spans clusters.
        suffix = "" if cluster.name == "aws-east" else f"-{cluster.name.split('-')[0]}"
        run = _Run(
            workload,
            f"{workload.base}{suffix}-r{number + cluster.run_base}",
            _user_for(rng, workload),
            rng.randint(*workload.jobs_per_run),
        )
        cluster.runs[workload.base] = run
    return run


def _labels(workload: Workload, run: _Run, restart: bool) -> tuple[str, str, str]:
    """(job name, wckey, comment) carrying the run id the way the team does it; a service's
    comment says `service=true`."""
    name, wckey, comment = _run_labels(workload, run, restart)
    if workload.service:
        comment = f"{comment} service=true".strip()
    return name, wckey, comment


def _run_labels(workload: Workload, run: _Run, restart: bool) -> tuple[str, str, str]:
    team = TEAM_BY_SLUG.get(workload.team)
    key = team.run_key if team else RunKey.NAME
    if key == RunKey.WCKEY:
        return workload.job_name, run.run_id, ""
    if key == RunKey.COMMENT:
        comment = f"run={run.run_id}" + (" resume=true" if restart else "")
        return workload.job_name, "", comment
    if workload.interactive:
        return workload.job_name, "", ""
    return run.run_id, "", ""


def _pick(rng: Random, cluster: _Cluster, anchor: _NodeState) -> tuple[_Run, _Pending | None]:
    queue = cluster.pending.get(anchor.node.partition, [])
    if queue:
        item = queue.pop(0)
        return item.run, item
    choices = _eligible(cluster, anchor.node.partition, anchor.node.instance_type.gpu_model)
    for _ in range(8):
        workload = rng.choices(choices, weights=[w.weight for w in choices])[0]
        run = _run_for(rng, cluster, workload)
        # The next segment of a chained run waits for the previous one: do not hold this node
        # idle for it, give the node to other work meanwhile.
        if not workload.chained or run.not_before <= anchor.ready(1) + 2 * HOUR:
            break
    return run, None


def _duration_and_state(rng: Random, workload: Workload) -> tuple[int, str]:
    lo, hi = workload.hours
    planned = int(rng.uniform(lo, hi) * HOUR)
    limit = int(workload.time_limit_hours * HOUR)
    if planned >= limit:
        # Slurm kills the job a little after its limit.
        return limit + rng.randint(20, 90), "TIMEOUT"
    roll = rng.random()
    if roll < 0.06:
        return max(120, int(planned * rng.uniform(0.02, 0.6))), "FAILED"
    if roll < 0.10:
        return max(60, int(planned * rng.uniform(0.05, 0.9))), "CANCELLED"
    return planned, "COMPLETED"


def _gap(rng: Random, workload: Workload, utilisation: float) -> int:
    if workload.always_on:  # resubmitted by its service within minutes
        return rng.randint(60, 600)
    mean = (sum(workload.hours) / 2) * HOUR * (1 - utilisation) / utilisation
    return int(rng.expovariate(1 / mean)) if mean > 0 else 0


def _choose_nodes(cluster: _Cluster, anchor: _NodeState, nodes: int) -> list[_NodeState]:
    others = sorted(
        (
            ns
            for ns in cluster.nodes
            if ns is not anchor and not ns.done and ns.node.partition == anchor.node.partition
        ),
        key=lambda ns: (ns.ready(8), ns.node.hostname),
    )
    return [anchor, *others[: nodes - 1]]


def _occupy(chosen: list[_NodeState], gpus: int, until: int) -> None:
    for ns in chosen:
        order = sorted(range(len(ns.free)), key=lambda i: (ns.free[i], i))
        for i in order[:gpus]:
            ns.free[i] = until


def _fix_end(cluster: _Cluster, start: int, end: int, window_end: int) -> int:
    """Move an end out of a blocked interval (never past the window, never before start)."""
    blocked = _in_blocked(cluster, end)
    if blocked is None:
        return end
    later = blocked[1] + 60
    if later <= window_end:
        return later
    # blocked[0] > start: a start is never inside a blocked interval.
    return max(start + 1, blocked[0] - 60)


def _find_window(
    rng: Random,
    cluster: _Cluster,
    anchor: _NodeState,
    run: _Run,
    pending: _Pending | None,
    utilisation: float,
) -> tuple[list[_NodeState], int, tuple[int, int]] | None:
    """The nodes, GPUs per node and billed window for the job, trying the run's node count then
    one node; None when the anchor has no room left this month."""
    workload = run.workload
    wanted = 1 if pending and pending.array_key else workload.nodes
    for nodes_count in dict.fromkeys((wanted, 1)):
        chosen = _choose_nodes(cluster, anchor, nodes_count)
        gpus = workload.gpus_per_node if len(chosen) == 1 else 8
        earliest = max(ns.ready(gpus) for ns in chosen)
        if pending is not None:
            earliest = max(earliest, pending.not_before + rng.randint(60, 900))
        else:
            earliest += _gap(rng, workload, utilisation)
            if workload.chained:
                earliest = max(earliest, run.not_before)
        window = _common_window(chosen, earliest)
        while window is not None and (blocked := _in_blocked(cluster, window[0])):
            window = _common_window(chosen, blocked[1])
        if window is not None and window[0] < cluster.month_len - 600:
            return chosen, gpus, window
    return None


def _place(rng: Random, cluster: _Cluster, anchor: _NodeState, utilisation: float) -> bool:
    """Schedule one job with `anchor` among its nodes. False when the anchor is full up."""
    run, pending = _pick(rng, cluster, anchor)
    workload = run.workload
    found = _find_window(rng, cluster, anchor, run, pending, utilisation)
    if found is None:
        anchor.done = True
        if pending is not None:  # put it back for another node
            cluster.pending.setdefault(anchor.node.partition, []).insert(0, pending)
        return False
    chosen, gpus, (start, window_end) = found
    duration, state = _duration_and_state(rng, workload)
    end: int | None = start + duration
    assert end is not None
    planned_end = end
    if end > window_end:
        # Cut short by the reclaim of a spot node (rather than the end of the month).
        spot = any(
            ns.node.pricing == Pricing.DYNAMIC
            and _next_window(ns.node, start) == (start, window_end)
            for ns in chosen
        )
        if window_end >= cluster.month_len:
            state, end = "RUNNING", None
        elif spot:
            # Killed at the reclaim notice, up to two minutes before the node goes.
            state, end = "PREEMPTED", max(start + 1, window_end - rng.randint(30, 120))
        else:
            # The node is drained before it leaves: the job is cut short by its owner.
            end = window_end - rng.randint(60, 900)
            state = "CANCELLED" if end - start > 600 else ""
            if not state:
                _occupy(chosen, gpus, window_end)
                if pending is not None:
                    cluster.pending.setdefault(anchor.node.partition, []).insert(0, pending)
                return True
    if end is not None:
        end = _fix_end(cluster, start, end, window_end)
    job = _record(rng, cluster, run, pending, chosen, gpus, start, end, state)
    if end is None:
        job.planned_end = planned_end
    _occupy(chosen, gpus, cluster.month_len if end is None else end)
    return True


def _record(
    rng: Random,
    cluster: _Cluster,
    run: _Run,
    pending: _Pending | None,
    chosen: list[_NodeState],
    gpus: int,
    start: int,
    end: int | None,
    state: str,
) -> Job:
    workload = run.workload
    assert end is None or start < end, (start, end)
    restart = pending is not None and pending.restart
    name, wckey, comment = _labels(workload, run, restart)
    array_key, array_index = (pending.array_key, pending.array_index) if pending else ("", -1)
    if not pending:
        run.remaining -= 1
        if workload.array:
            run.arrays += 1
            array_key, array_index = f"{run.run_id}#{run.arrays}", 0
            queue = cluster.pending.setdefault(chosen[0].node.partition, [])
            queue.extend(_Pending(run, start, array_key, i) for i in range(1, workload.array))
    if end is not None:
        run.not_before = end
    cancelled_by = None
    if state == "CANCELLED":
        cancelled_by = ADMIN_UID if rng.random() < 0.15 else run.user[1]
    itype = chosen[0].node.instance_type
    user = run.user if workload.team else _user_for(rng, workload)
    job = Job(
        cluster=cluster.name,
        partition=chosen[0].node.partition,
        run_id=run.run_id,
        name=name,
        account=workload.account or TEAM_BY_SLUG[workload.team].accounts[0],
        user=user[0],
        uid=user[1],
        wckey=wckey,
        comment=comment,
        gpu_model=itype.gpu_model,
        gpus_per_node=gpus,
        cpus_per_gpu=itype.vcpus // itype.gpus,
        mem_gib_per_gpu=int(itype.mem_gib * 0.9) // itype.gpus,
        nodes=sorted(ns.node.hostname for ns in chosen),
        start=start,
        end=end,
        state=state,
        cancelled_by=cancelled_by,
        array_key=array_key,
        array_index=array_index,
        interactive=workload.interactive,
        service=workload.service,
        requeue_of=pending.requeue_of if pending else None,
    )
    cluster.jobs.append(job)
    if state == "PREEMPTED" and end is not None:
        # The run's wrapper resubmits it as a new job of the same run once capacity is back
        # (an array task too: a requeued task would reuse its JobID, one record per id here).
        queue = cluster.pending.setdefault(chosen[0].node.partition, [])
        queue.append(_Pending(run, end, restart=True, requeue_of=job if cluster.requeue else None))
    return job


def _pending_at_month_end(rng: Random, cluster: _Cluster, month_len: int) -> None:
    """A few jobs still queued at month end, and one cancelled before it ever started."""
    shared = sorted({ns.node.partition for ns in cluster.nodes} - DEDICATED_PARTITIONS)
    for i in range(3):
        workload = rng.choice([w for w in WORKLOADS if cluster.name in w.clusters and w.team])
        partitions = sorted(set(workload.partitions)) or shared
        run = _run_for(rng, cluster, workload)
        name, wckey, comment = _labels(workload, run, False)
        gpu_model = "h100" if "h100" in workload.gpu_models else "a100"
        state = "CANCELLED" if i == 0 else "PENDING"
        at = month_len - rng.randint(2 * HOUR, 20 * HOUR) if i == 0 else None
        cluster.jobs.append(
            Job(
                cluster=cluster.name,
                partition=rng.choice(partitions),
                run_id=run.run_id,
                name=name,
                account=workload.account or TEAM_BY_SLUG[workload.team].accounts[0],
                user=run.user[0],
                uid=run.user[1],
                wckey=wckey,
                comment=comment,
                gpu_model=gpu_model,
                gpus_per_node=workload.gpus_per_node if workload.nodes == 1 else 8,
                cpus_per_gpu=12,
                mem_gib_per_gpu=100,
                nodes=[],
                start=at,
                end=at,
                state=state,
                cancelled_by=run.user[1] if i == 0 else None,
                service=workload.service,
            )
        )


def _assign_ids(rng: Random, jobs: list[Job], first_id: int, month_len: int) -> None:
    """Slurm numbers jobs in submission order; array tasks share the array's id."""
    jobs.sort(key=lambda j: (month_len if j.start is None else j.start, j.nodes, j.run_id))
    next_id = first_id
    array_ids: dict[str, int] = {}
    for job in jobs:
        next_id += rng.randint(1, 3)
        if job.requeue_of is not None:
            job.job_id, job.job_id_raw = job.requeue_of.job_id, job.requeue_of.job_id_raw
            continue
        if job.array_key:
            base = array_ids.setdefault(job.array_key, next_id)
            job.job_id = f"{base}_{job.array_index}"
        else:
            job.job_id = str(next_id)
        job.job_id_raw = str(next_id)


def schedule_cluster(
    *,
    rng: Random,
    month: Month,
    cluster: str,
    time_zone: str,
    nodes: list[Node],
    history: int | None = None,
    requeue: bool = False,
) -> list[Job]:
    """All jobs of one cluster for the month, ids assigned, ordered as sacct lists them.
    `history`: the month's index in a several-month demo: run numbers and job ids start past
    the earlier months'. `requeue`: a preempted job is requeued under its JobID (Slurm's
    --requeue) instead of resubmitted as a new job of its run."""
    state = _Cluster(
        name=cluster,
        month_len=month.seconds,
        blocked=blocked_intervals(month, time_zone),
        nodes=[_NodeState(n, [n.up[0][0] if n.up else month.seconds] * 8) for n in nodes],
        run_base=0 if history is None else 1000 * history,
        requeue=requeue,
    )
    utilisation = rng.uniform(0.80, 0.88)
    heap = [(ns.ready(1), ns.node.hostname, i) for i, ns in enumerate(state.nodes)]
    heapq.heapify(heap)
    while heap:
        ready, _, i = heapq.heappop(heap)
        ns = state.nodes[i]
        if ns.done:
            continue
        if ns.ready(1) != ready:  # stale entry: another job moved this node on
            heapq.heappush(heap, (ns.ready(1), ns.node.hostname, i))
            continue
        if ready >= month.seconds - 600:
            ns.done = True
            continue
        _place(rng, state, ns, utilisation)
        if not ns.done:
            heapq.heappush(heap, (ns.ready(1), ns.node.hostname, i))
    _pending_at_month_end(rng, state, month.seconds)
    first_id = rng.randint(100_000, 900_000)
    if history is not None:
        # Job ids grow month after month as a real cluster's do, never reused.
        first_id = 200_000 + 50_000 * history + first_id % 1000
    _assign_ids(rng, state.jobs, first_id, month.seconds)
    return state.jobs
