"""The demo's month-crossing jobs and pods (finops/demo/carry.py): what a month's exports leave
running, the next month's sacct export and pod list show again with their real end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from finops.demo.dataset import DemoDataset, dataset_build, dataset_write
from finops.demo.fleet import Month, Scale
from finops.demo.history import history_plans

LAST = Month(2025, 10)


@pytest.fixture(scope="module")
def two_months() -> tuple[DemoDataset, DemoDataset]:
    first_plan, second_plan = history_plans(last=LAST, count=2)
    first = dataset_build(seed=42, month=first_plan.month, scale=Scale.SMALL, plan=first_plan)
    second = dataset_build(
        seed=42, month=second_plan.month, scale=Scale.SMALL, plan=second_plan,
        carried=first.still_open(),
    )  # fmt: skip
    return first, second


def test_every_open_job_and_pod_is_listed_again(two_months: tuple[DemoDataset, ...]) -> None:
    first, second = two_months
    shift = first.month.seconds
    open_jobs = first.still_open().jobs
    assert sum(len(jobs) for jobs in open_jobs.values()) > 0
    for cluster, jobs in open_jobs.items():
        carried = {j.job_id: j for j in second.carried_jobs[cluster]}
        assert set(carried) == {j.job_id for j in jobs}
        for job in jobs:
            again = carried[job.job_id]
            assert job.start is not None
            assert again.start == job.start - shift
            assert again.nodes == job.nodes
    open_pods = first.still_open().pods
    assert sum(len(pods) for pods in open_pods.values()) > 0
    for cluster, pods in open_pods.items():
        assert {p.uid for p in second.carried_pods[cluster]} == {p.uid for p in pods}


def test_a_carried_job_ends_before_the_next_job_on_its_nodes(
    two_months: tuple[DemoDataset, ...],
) -> None:
    _, second = two_months
    up_at_start = {n.hostname: n.up[0][1] for n in second.nodes if n.up and n.up[0][0] == 0}
    ended = 0
    for cluster, carried in second.carried_jobs.items():
        for job in carried:
            if job.end is None:  # still running: nothing of this month starts on its nodes
                assert job.state == "RUNNING"
                assert not any(
                    set(job.nodes) & set(j.nodes) for j in second.jobs[cluster] if j.start
                )
                continue
            ended += 1
            assert job.state == "COMPLETED"
            assert job.start is not None
            assert job.start < 0 <= job.end < second.month.seconds
            if job.planned_end is not None:
                assert job.end <= job.planned_end
            for host in job.nodes:
                if host not in up_at_start:
                    assert job.end == 0  # the node left the fleet at the month end
                    continue
                assert job.end <= up_at_start[host]
                starts = [
                    j.start for j in second.jobs[cluster] if host in j.nodes and j.start is not None
                ]
                assert all(job.end <= start for start in starts), (job, min(starts))
    assert ended


def test_the_next_exports_print_the_real_end(
    two_months: tuple[DemoDataset, ...], tmp_path: Path
) -> None:
    _, second = two_months
    files = dataset_write(dataset=second, out=tmp_path)
    cluster, carried = next((c, jobs) for c, jobs in second.carried_jobs.items() if jobs)
    job = next(j for j in carried if j.end is not None)
    sacct = next(f for f in files if f.kind == "jobs" and f.source == cluster)
    line = next(
        row.split("|") for row in sacct.path.read_text().splitlines()
        if row.startswith(f"{job.job_id}|")
    )  # fmt: skip
    assert line[6] == "COMPLETED"
    assert line[7] < f"{second.month.label}-01" <= line[8] != "Unknown"
    pods_cluster, pods = next((c, p) for c, p in second.carried_pods.items() if p)
    listed = next(f for f in files if f.kind == "jobs" and f.source == pods_cluster)
    items = {i["metadata"]["uid"]: i for i in json.loads(listed.path.read_text())["items"]}
    pod = next(p for p in pods if p.end is not None)
    status = items[pod.uid]["status"]
    assert status["phase"] == "Succeeded"
    finished = status["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    assert status["startTime"] < f"{second.month.label}-01" <= finished
