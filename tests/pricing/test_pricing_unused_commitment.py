"""Unused commitment cost is assigned by the idle policy (issue 13), hand-computed.

The scene (cluster c1, 2025-06-03 00:00-01:00 UTC):
- gpu-a, p5.48xlarge, $80, covered by reservation ri-1: job 1 (vision) holds 4 of 8 GPUs
  -> training 40, idle 40.
- gpu-b, p4d.24xlarge, $32: job 2 (speech) holds 4 of 8 GPUs -> training 16, idle 16.
- Unused commitment lines of the same hour (CommitmentDiscountStatus Unused, no node):
  ri-1 $30 (the reservation gpu-a used), ri-2 $12 (p4d.24xlarge, never used this month),
  sp-9 $6 (no instance type, nothing to tie it to).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, IdlePolicy, SharedCostRule
from finops.org.models import Team

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)


def line(batch: ImportBatch, cost: str, **fields: object) -> CostLineItem:
    values: dict[str, object] = {
        "batch": batch, "source": "aws", "billing_period": MONTH,
        "billing_period_start": dt.datetime(2025, 6, 1, tzinfo=dt.UTC), "provider_name": "AWS",
        "billing_account_id": "111", "billing_currency": "USD", "charge_period_start": T0,
        "charge_period_end": T0 + dt.timedelta(hours=1), "billed_cost": Decimal(cost),
        "effective_cost": Decimal(cost), "service_name": "Amazon EC2",
    }  # fmt: skip
    values.update(fields)
    return CostLineItem.objects.create(**values)


def unused(
    batch: ImportBatch, commitment: str, cost: str, instance_type: str, **fields: object
) -> CostLineItem:
    return line(
        batch, cost, charge_category="Purchase", commitment_discount_id=commitment,
        commitment_discount_status="Unused", commitment_discount_type="Reserved",
        x_instance_type=instance_type, sub_account_id=commitment, **fields,
    )  # fmt: skip


@pytest.fixture
def platform(db: None) -> Team:
    return Team.objects.create(slug="platform", name="Platform")


@pytest.fixture
def scene(team: Team, other_team: Team) -> None:
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="aws", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c1", file_name="j", status="succeeded"
    )
    line(
        billing, "80", resource_name="gpu-a", x_instance_type="p5.48xlarge",
        pricing_category="Committed", commitment_discount_id="ri-1",
        commitment_discount_status="Used", list_cost=Decimal(100),
    )  # fmt: skip
    line(billing, "32", resource_name="gpu-b", x_instance_type="p4d.24xlarge")
    unused(billing, "ri-1", "30", "p5.48xlarge")
    unused(billing, "ri-2", "12", "p4d.24xlarge")
    unused(billing, "sp-9", "6", "")
    for job_id, node, account in (("1", "gpu-a", team.slug), ("2", "gpu-b", other_team.slug)):
        JobRecord.objects.create(
            batch=jobs, cluster="c1", job_id=job_id, state="COMPLETED", start=T0,
            end=T0 + dt.timedelta(hours=1), gpus=Decimal(4), nodes=[node], account=account,
            run_id=f"run-{job_id}",
        )  # fmt: skip


def attribute() -> str:
    out = StringIO()
    call_command("attribute", "--month", "2025-06", stdout=out)
    return out.getvalue()


def unused_rows() -> dict[tuple[str, int | None, int | None], Decimal]:
    """(commitment, team, job) -> amount of the unused lines' ledger rows (each unused line
    has its commitment as sub-account, which the ledger rows keep); all must be idle."""
    commitments = ("ri-1", "ri-2", "sp-9")
    rows: dict[tuple[str, int | None, int | None], Decimal] = {}
    for row in AllocatedCost.objects.filter(sub_account_id__in=commitments):
        assert row.category == "idle", row.category
        assert row.node == ""
        key = (row.sub_account_id, row.team_id, row.job_id)
        rows[key] = rows.get(key, Decimal(0)) + row.amount
    return rows


def assert_conserved() -> None:
    billed = sum((li.effective_cost for li in CostLineItem.objects.all()), Decimal(0))
    listed = sum((li.list_cost for li in CostLineItem.objects.exclude(list_cost=None)), Decimal(0))
    ledger = AllocatedCost.objects.all()
    assert sum((r.amount for r in ledger), Decimal(0)) == billed == Decimal(160)
    # ListCost: gpu-a's bill value 100; gpu-b (no bill value, no catalogue hit needed here)
    # and the unused purchases carry their own rules, so only the column sum is asserted.
    assert sum((r.list_cost for r in ledger), Decimal(0)) >= listed


def test_without_a_policy_unused_commitment_is_idle_never_unallocated(scene: None) -> None:
    output = attribute()
    # Default policy keep with the line's own owner: the unused lines have none, so each is a
    # teamless (platform) idle line, whole.
    assert unused_rows() == {
        ("ri-1", None, None): Decimal(30),
        ("ri-2", None, None): Decimal(12),
        ("sp-9", None, None): Decimal(6),
    }
    assert "difference 0" in output
    assert_conserved()


def test_unused_commitment_follows_the_policy_of_the_pool_it_was_bought_for(
    scene: None, platform: Team, other_team: Team
) -> None:
    # gpu-a's pool goes to the platform team, the rest of c1 keeps its idle with speech.
    IdlePolicy.objects.create(node_prefix="gpu-a", policy="platform", owner_team=platform,
                              priority=1)  # fmt: skip
    IdlePolicy.objects.create(cluster="c1", policy="keep", owner_team=other_team, priority=2)
    attribute()
    assert unused_rows() == {
        # ri-1 covered gpu-a this month: gpu-a's pool.
        ("ri-1", platform.pk, None): Decimal(30),
        # ri-2 covered nothing; its type p4d.24xlarge is gpu-b's: gpu-b's pool.
        ("ri-2", other_team.pk, None): Decimal(12),
        # sp-9 ties to no node: default keep with its own owner (none).
        ("sp-9", None, None): Decimal(6),
    }
    assert_conserved()


def test_spread_puts_unused_commitment_on_the_pools_jobs_pro_rata(
    scene: None, team: Team, other_team: Team
) -> None:
    IdlePolicy.objects.create(cluster="c1", policy="spread")
    attribute()
    job1 = JobRecord.objects.get(job_id="1").pk
    job2 = JobRecord.objects.get(job_id="2").pk
    rows = unused_rows()
    # The jobs' GPU cost that day on the pool: job 1 40, job 2 16 (weights 40:16).
    # ri-1: 30 x 40/56 = 21.428571428571|43 and 30 x 16/56 = 8.571428571428|57 (12 places);
    # the floors sum to one unit short, which goes to the larger remainder (job 2).
    assert rows[("ri-1", team.pk, job1)] == Decimal("21.428571428571")
    assert rows[("ri-1", other_team.pk, job2)] == Decimal("8.571428571429")
    # ri-2: 12 x 40/56 = 8.571428571428|57, 12 x 16/56 = 3.428571428571|43: the unit to job 1.
    assert rows[("ri-2", team.pk, job1)] == Decimal("8.571428571429")
    assert rows[("ri-2", other_team.pk, job2)] == Decimal("3.428571428571")
    # sp-9 has no pool: it stays a teamless idle line.
    assert rows[("sp-9", None, None)] == Decimal(6)
    assert len(rows) == 5
    assert_conserved()


def test_a_shared_cost_rule_does_not_take_unused_commitment(
    scene: None, team: Team, other_team: Team
) -> None:
    # A catch-all shared rule would split every unallocated line; unused commitment is idle,
    # not an unallocated line, so the rule leaves it alone.
    SharedCostRule.objects.create(name="everything", method="even")
    attribute()
    assert set(unused_rows()) == {("ri-1", None, None), ("ri-2", None, None), ("sp-9", None, None)}
    assert not AllocatedCost.objects.filter(category__in=("shared", "unallocated")).exists()


def test_a_tagged_unused_commitment_without_a_pool_stays_with_its_team(
    scene: None, team: Team
) -> None:
    CostLineItem.objects.filter(commitment_discount_id="sp-9").update(tags={"team": "vision"})
    attribute()
    assert unused_rows()[("sp-9", team.pk, None)] == Decimal(6)
