"""Idle policies per cluster / node pool (DESIGN 5.4), hand-computed, through `attribute --month`.

The scene (cluster c1, 8-GPU p5.48xlarge nodes, 2025-06-03 00:00-01:00 UTC):
- gpu-a, $80: job 1 (vision) holds 4 GPUs all hour -> training 40, idle 40.
- gpu-b, $32: job 2 (speech) holds 4 GPUs all hour -> training 16, idle 16.
- gpu-c, $24 on the next day, no jobs at all -> idle 24.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO
from typing import Any, TypedDict

import pytest
from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, IdlePolicy, RunCost
from finops.org.models import Team

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)
DAY = dt.date(2025, 6, 3)
NEXT_DAY = dt.date(2025, 6, 4)


def at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def node_line(
    batch: ImportBatch, node: str, cost: str, start: float, end: float, **fields: Any
) -> CostLineItem:
    values: dict[str, Any] = {
        "batch": batch, "source": "aws", "billing_period": MONTH,
        "billing_period_start": dt.datetime(2025, 6, 1, tzinfo=dt.UTC), "provider_name": "AWS",
        "billing_account_id": "111", "billing_currency": "USD", "charge_period_start": at(start),
        "charge_period_end": at(end), "billed_cost": Decimal(cost),
        "effective_cost": Decimal(cost), "service_name": "Amazon EC2", "resource_name": node,
        "x_instance_type": "p5.48xlarge",
    }  # fmt: skip
    values.update(fields)
    return CostLineItem.objects.create(**values)


def job(batch: ImportBatch, job_id: str, node: str, account: str, cluster: str = "c1") -> JobRecord:
    return JobRecord.objects.create(
        batch=batch, cluster=cluster, job_id=job_id, state="COMPLETED", start=at(0), end=at(1),
        gpus=Decimal(4), nodes=[node], account=account, run_id=f"run-{job_id}",
    )  # fmt: skip


@pytest.fixture
def platform(db: None) -> Team:
    return Team.objects.create(slug="platform", name="Platform")


class Scene(TypedDict):
    job1: JobRecord
    job2: JobRecord
    jobs_batch: ImportBatch
    billing: ImportBatch


@pytest.fixture
def scene(team: Team, other_team: Team) -> Scene:
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="aws", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c1", file_name="j", status="succeeded"
    )
    node_line(billing, "gpu-a", "80", 0, 1)
    node_line(billing, "gpu-b", "32", 0, 1)
    node_line(billing, "gpu-c", "24", 24, 25)
    # The Slurm accounts are the fixture teams' slugs: vision and speech.
    return {
        "job1": job(jobs, "1", "gpu-a", team.slug),
        "job2": job(jobs, "2", "gpu-b", other_team.slug),
        "jobs_batch": jobs,
        "billing": billing,
    }


def attribute() -> str:
    out = StringIO()
    call_command("attribute", "--month", "2025-06", stdout=out)
    return out.getvalue()


def idle_rows() -> dict[tuple, Decimal]:
    rows: dict[tuple, Decimal] = {}
    for row in AllocatedCost.objects.filter(category="idle"):
        key = (row.day, row.node, row.team_id, row.job_id)
        rows[key] = rows.get(key, Decimal(0)) + row.amount
    return rows


def training_total() -> Decimal:
    return sum((r.amount for r in AllocatedCost.objects.filter(category="training")), Decimal(0))


def test_no_policy_keeps_todays_explicit_idle_lines(scene: Scene) -> None:
    output = attribute()
    assert idle_rows() == {
        (DAY, "gpu-a", None, None): Decimal(40),
        (DAY, "gpu-b", None, None): Decimal(16),
        (NEXT_DAY, "gpu-c", None, None): Decimal(24),
    }
    assert training_total() == Decimal(56)
    assert "difference 0" in output


def test_keep_gives_the_idle_to_the_pool_owner(scene: Scene, platform: Team) -> None:
    IdlePolicy.objects.create(cluster="c1", policy="keep", owner_team=platform)
    attribute()
    # gpu-c has no jobs, so no known cluster: the c1 rule does not reach it.
    assert idle_rows() == {
        (DAY, "gpu-a", platform.pk, None): Decimal(40),
        (DAY, "gpu-b", platform.pk, None): Decimal(16),
        (NEXT_DAY, "gpu-c", None, None): Decimal(24),
    }


def test_keep_without_owner_leaves_the_node_lines_own_owner(scene: Scene, team: Team) -> None:
    # A node line tagged team=vision: its idle is vision's under keep without an owner.
    CostLineItem.objects.filter(resource_name="gpu-b").update(tags={"team": "vision"})
    IdlePolicy.objects.create(policy="keep")
    attribute()
    assert idle_rows()[(DAY, "gpu-b", team.pk, None)] == Decimal(16)


def test_platform_bucket_ignores_the_line_owner(scene: Scene, team: Team, platform: Team) -> None:
    CostLineItem.objects.filter(resource_name="gpu-b").update(tags={"team": "vision"})
    IdlePolicy.objects.create(node_prefix="gpu-", policy="platform", owner_team=platform)
    attribute()
    assert idle_rows() == {
        (DAY, "gpu-a", platform.pk, None): Decimal(40),
        (DAY, "gpu-b", platform.pk, None): Decimal(16),
        (NEXT_DAY, "gpu-c", platform.pk, None): Decimal(24),
    }


def test_platform_without_a_team_is_a_teamless_idle_bucket(scene: Scene, team: Team) -> None:
    CostLineItem.objects.filter(resource_name="gpu-b").update(tags={"team": "vision"})
    IdlePolicy.objects.create(policy="platform")
    attribute()
    assert {team_id for (_, _, team_id, _) in idle_rows()} == {None}


def test_spread_puts_the_pools_idle_on_its_jobs_pro_rata_to_their_cost(
    scene: Scene, team: Team, other_team: Team
) -> None:
    IdlePolicy.objects.create(cluster="c1", policy="spread")
    output = attribute()
    # Idle of the pool (cluster c1) on 06-03: 40 + 16 = 56, over jobs costing 40 and 16:
    # job 1 gets 56 x 40/56 = 40, job 2 gets 56 x 16/56 = 16. Job 1 takes part of gpu-b's idle
    # although it never ran there: the pool is the cluster.
    job1, job2 = scene["job1"], scene["job2"]
    assert idle_rows() == {
        (DAY, "", team.pk, job1.pk): Decimal(40),
        (DAY, "", other_team.pk, job2.pk): Decimal(16),
        # gpu-c's cluster is unknown (no jobs ever ran on it): not in the pool, kept.
        (NEXT_DAY, "gpu-c", None, None): Decimal(24),
    }
    spread = AllocatedCost.objects.get(category="idle", job=job1)
    assert (spread.run_id, spread.gpu_seconds) == ("run-1", 0)
    # The run carries its fully loaded cost (training + spread idle); GPU-hours stay 4.
    run = RunCost.objects.get(run_id="run-1")
    assert (run.cost, run.gpu_hours) == (Decimal(80), 4)
    assert "difference 0" in output


def test_spread_pool_day_without_jobs_keeps_its_idle_under_keep_rules(
    scene: Scene, platform: Team
) -> None:
    # A prefix pool takes in gpu-c; on 06-04 the pool has no jobs: nobody to spread onto, so
    # its idle stays an explicit line, owned by the policy's owner as under keep.
    IdlePolicy.objects.create(node_prefix="gpu-", policy="spread", owner_team=platform)
    attribute()
    rows = idle_rows()
    assert rows[(NEXT_DAY, "gpu-c", platform.pk, None)] == Decimal(24)
    assert sum(v for (day, *_), v in rows.items() if day == DAY) == Decimal(56)
    assert all(job_id for (day, _, _, job_id) in rows if day == DAY)


def test_prefix_pools_spread_only_within_the_pool(scene: Scene, team: Team) -> None:
    # gpu-a alone is a spread pool; everything else (gpu-b, gpu-c) keeps.
    IdlePolicy.objects.create(node_prefix="gpu-a", policy="spread", priority=10)
    IdlePolicy.objects.create(policy="keep", priority=20)
    attribute()
    assert idle_rows() == {
        (DAY, "", team.pk, scene["job1"].pk): Decimal(40),
        (DAY, "gpu-b", None, None): Decimal(16),
        (NEXT_DAY, "gpu-c", None, None): Decimal(24),
    }


def test_policy_of_another_cluster_does_not_apply(scene: Scene, platform: Team) -> None:
    IdlePolicy.objects.create(cluster="c2", policy="platform", owner_team=platform)
    attribute()
    assert platform.pk not in {team_id for (_, _, team_id, _) in idle_rows()}


def test_node_cluster_comes_from_its_jobs(scene: Scene, platform: Team) -> None:
    # A third job on gpu-c (next day) from cluster c2: gpu-c is c2's, and c2's policy applies.
    job3 = job(scene["jobs_batch"], "3", "gpu-c", "vision", cluster="c2")
    JobRecord.objects.filter(pk=job3.pk).update(start=at(24), end=at(24.5))
    IdlePolicy.objects.create(cluster="c2", policy="platform", owner_team=platform)
    attribute()
    # 4 GPUs x 0.5 h of a $24 8-GPU hour = 6; idle 18, to the platform.
    assert idle_rows()[(NEXT_DAY, "gpu-c", platform.pk, None)] == Decimal(18)
    assert idle_rows()[(DAY, "gpu-a", None, None)] == Decimal(40)


def test_spread_rounds_exactly_with_largest_remainder(team: Team, other_team: Team) -> None:
    # Idle of 1 cent over two jobs of equal cost: half a cent each is exact; 3 jobs of equal
    # cost and an idle of 10^-12 x 10 are not: floors 3+3+3, the extra unit to the lowest job id.
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="aws", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c1", file_name="j", status="succeeded"
    )
    quantum = Decimal(1).scaleb(-12)
    # 3 jobs of 2 GPUs on an 8-GPU node: 6/8 of the cost is training, 2/8 idle. Cost 40 units:
    # training 10 units per job, idle 10 units.
    node_line(billing, "gpu-a", str(40 * quantum), 0, 1)
    made = [job(jobs, str(i), "gpu-a", "vision") for i in (1, 2, 3)]
    JobRecord.objects.update(gpus=Decimal(2))
    IdlePolicy.objects.create(policy="spread")
    attribute()
    idle = {r.job_id: r.amount for r in AllocatedCost.objects.filter(category="idle")}
    first = min(j.pk for j in made)
    assert idle == {j.pk: (4 if j.pk == first else 3) * quantum for j in made}
    assert sum(r.amount for r in AllocatedCost.objects.all()) == 40 * quantum
