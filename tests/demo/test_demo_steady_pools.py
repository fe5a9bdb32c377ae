"""The demo's steady on-demand pools (issue 27): vision's own A100 nodes for its continual
training (AWS p4d) and platform's always-on GPU CI runners (GCP a2). Real fleets have such
pools, and they are what commitment advice is for: use that never stops, bought on demand at
list price, which a commitment at the P10 demand of the last 90 days would cover for less.

The pools' shape over a three-month history as the demo builds it (growth, weekend
scale-down), from the generator alone; and, end to end on a small one-month demo, the advice
every team gets."""

from __future__ import annotations

import io
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from billing_ingest.models import JobRecord
from finops.demo.carry import StillOpen
from finops.demo.dataset import DemoDataset, dataset_build
from finops.demo.fleet import HOUR, Month, Pricing, Scale
from finops.demo.history import history_plans
from finops.demo.teams import SANDBOX_ACCOUNT, TEAM_BY_SLUG, TEAMS
from finops.org.models import Team
from finops.pricing.recommendations import recommendations_compute
from finops.waste.advice import checkpoint_advice

LAST = Month(2025, 10)
# partition -> (cluster, instance type, the team kept on it)
STEADY = {
    "a100-cv": ("aws-east", "p4d.24xlarge", "vision"),
    "a100-ci": ("gcp-central", "a2-highgpu-8g", "platform"),
}


@pytest.fixture(scope="module")
def history() -> list[DemoDataset]:
    months = []
    carried: StillOpen | None = None
    for plan in history_plans(last=LAST, count=3):
        dataset = dataset_build(
            seed=42, month=plan.month, scale=Scale.FULL, plan=plan, carried=carried
        )
        carried = dataset.still_open()
        months.append(dataset)
    return months


def _gpus_per_hour(dataset: DemoDataset, partition: str) -> np.ndarray:
    """GPUs in use per hour of the month on the partition's nodes (jobs still running at the
    month end count to its end)."""
    cluster = STEADY[partition][0]
    hours = dataset.month.seconds // HOUR
    use = np.zeros(hours)
    for job in dataset.jobs[cluster]:
        if job.partition != partition or job.start is None:
            continue
        end = dataset.month.seconds if job.end is None else job.end
        for hour in range(job.start // HOUR, -(-end // HOUR)):
            overlap = min(end, (hour + 1) * HOUR) - max(job.start, hour * HOUR)
            use[hour] += job.gpus * overlap / HOUR
    return use


@pytest.mark.parametrize("partition", sorted(STEADY))
def test_steady_pool_is_on_demand_and_kept_for_its_team(
    history: list[DemoDataset], partition: str
) -> None:
    cluster, instance_type, team = STEADY[partition]
    accounts = set(TEAM_BY_SLUG[team].accounts)
    for dataset in history:
        nodes = [n for n in dataset.nodes if n.partition == partition]
        assert nodes, dataset.month.label
        for node in nodes:
            assert node.cluster == cluster
            assert node.instance_type.name == instance_type
            assert node.pricing == Pricing.STANDARD
            assert not node.pool.commitment
        jobs = [j for j in dataset.jobs[cluster] if j.partition == partition and j.nodes]
        assert jobs
        assert {j.account for j in jobs} <= accounts
        # Nothing of another team on it, and its always-on work nowhere else.
        bases = {j.run_id.rsplit("-r", 1)[0] for j in jobs}
        elsewhere = {j.run_id for j in dataset.jobs[cluster] if j.partition != partition}
        assert not any(r.rsplit("-r", 1)[0] in bases for r in elsewhere)


@pytest.mark.parametrize("partition", sorted(STEADY))
def test_steady_pool_use_never_stops(history: list[DemoDataset], partition: str) -> None:
    """At least one whole node (8 GPUs) is in use round the clock: jobs follow one another
    within ten minutes, so no hour loses more than a few of its GPU-minutes. The P10 of the
    last 90 days is one node's GPUs (the second node is off at weekends, and in the first month
    the pool has one node)."""
    use = np.concatenate([_gpus_per_hour(d, partition) for d in history])[-90 * 24 :]
    assert len(use) == 90 * 24
    assert np.percentile(use, 10) >= 7.5
    assert use.min() >= 6  # the worst hour: two ten-minute gaps
    assert use.max() <= 16  # two nodes of eight GPUs


@pytest.mark.parametrize("partition", sorted(STEADY))
def test_steady_pool_pays_list_price(history: list[DemoDataset], partition: str) -> None:
    """Every hour of its nodes is billed on demand at list price (EffectiveCost = ListCost, no
    commitment): a commitment priced below list saves money on it."""
    dataset = history[-1]
    hosts = {n.hostname for n in dataset.nodes if n.partition == partition}
    key = {"aws-east": "aws", "gcp-central": "gcp"}[STEADY[partition][0]]
    rows = [r for r in dataset.bills[key] if r["ResourceName"] in hosts]
    assert len(rows) == sum(len(n.billed_hours()) for n in dataset.nodes if n.hostname in hosts)
    for row in rows:
        assert row["PricingCategory"] == Pricing.STANDARD
        assert row["CommitmentDiscountId"] == ""
        assert Decimal(row["EffectiveCost"]) == Decimal(row["ListCost"]) > 0


@pytest.mark.django_db(transaction=True)
def test_small_demo_gives_every_team_a_commitment_and_a_spot_or_rightsizing_saving(
    tmp_path: Path,
) -> None:
    """End to end on a one-month small demo (30 days of history: the shortest window the
    commitment rule reads): every team, the sandbox account's too, has a commitment and a spot
    or rightsizing recommendation that saves money; vision's and platform's commitments are
    their steady pools' (an AWS Savings Plan covering the p4d nodes, GCP a2 GPUs)."""
    call_command(
        "demo", "--scale", "small", "--month", LAST.label, "--months", "1", "--out",
        str(tmp_path), "--allow-demo-users", stdout=io.StringIO(),
    )  # fmt: skip
    drafts = recommendations_compute(month=LAST.start.date())
    slugs = dict(Team.objects.values_list("pk", "slug"))
    saving: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    keys: dict[str, set[str]] = defaultdict(set)
    for draft in drafts:
        if draft.team_id is not None and draft.monthly_savings > 0:
            team = slugs[draft.team_id]
            saving[team][draft.kind] = max(saving[team][draft.kind], draft.monthly_savings)
            keys[team].add(f"{draft.kind}:{draft.key}")
    teams = {t.slug for t in TEAMS} | {SANDBOX_ACCOUNT}
    assert set(saving) == teams
    for team in teams:
        assert saving[team]["commit"] > 0, team
        assert max(saving[team]["spot"], saving[team]["rightsize"]) > 0, team
    assert "commit:AWS:savings-plan" in keys["vision"]
    assert "commit:Google Cloud:a2-highgpu-8g:us-central1" in keys["platform"]
    # The CI runners are services (`--comment service=true`): none of their checkpoint advice
    # (it was "checkpoint every 267.5 minutes instead of 20", ~1,700 USD, for jobs that write
    # no checkpoints), their idle GPUs still counted.
    runners = JobRecord.objects.filter(partition="a100-ci")
    assert runners.exists()
    assert not runners.filter(service=False).exists()
    # The other services: the inference servers' pods (their endpoint label), nothing else.
    others = JobRecord.objects.exclude(partition="a100-ci").filter(service=True)
    assert others.exists()
    assert not others.filter(endpoint="").exists()
    advice = checkpoint_advice(
        month=LAST.start.date(), teams=Team.objects.filter(slug="platform"), include_unowned=False
    )
    service = [a for a in advice if a.pricing == "service"]
    assert [a.cluster for a in service] == ["gcp-central"]
    assert service[0].optimal_interval_minutes is None
    assert service[0].monthly_saving == 0
    assert "checkpoint:gcp-central:service" not in {d.key for d in drafts}
