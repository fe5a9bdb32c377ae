"""Shared-cost rules (DESIGN 5.5), hand-computed, through `attribute --month`.

Direct spend in the scene (2025-06-03 00:00-01:00 UTC, every GPU node fully used, so no idle):
- AWS: gpu-a $60 training for vision, gpu-b $20 training for speech.
- GCP (USD): gpu-g $40 training for speech.
- AWS S3 tagged team=ml: $10 tagged for ml (spend, but not GPU spend).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, SharedCostRule, SharedCostSplit
from finops.org.models import Team

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)
QUANTUM = Decimal(1).scaleb(-12)


def at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


@pytest.fixture
def billing(db: None) -> ImportBatch:
    return ImportBatch.objects.create(
        kind="billing", format="focus", source="bills", file_name="f", status="succeeded"
    )


def line(billing: ImportBatch, cost: str, **fields: Any) -> CostLineItem:
    values: dict[str, Any] = {
        "batch": billing, "source": "bills", "billing_period": MONTH,
        "billing_period_start": dt.datetime(2025, 6, 1, tzinfo=dt.UTC), "provider_name": "AWS",
        "billing_account_id": "111", "billing_currency": "USD", "charge_period_start": at(0),
        "charge_period_end": at(1), "billed_cost": Decimal(cost), "effective_cost": Decimal(cost),
        "charge_category": "Usage",
    }  # fmt: skip
    values.update(fields)
    return CostLineItem.objects.create(**values)


@pytest.fixture
def spend(billing: ImportBatch, team: Team, other_team: Team) -> dict[str, Team]:
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c1", file_name="j", status="succeeded"
    )
    for job_id, node, account, provider, cost, sku in [
        ("1", "gpu-a", "vision", "AWS", "60", "p5.48xlarge"),
        ("2", "gpu-b", "speech", "AWS", "20", "p5.48xlarge"),
        ("3", "gpu-g", "speech", "GCP", "40", "a3-highgpu-8g"),
    ]:
        line(billing, cost, provider_name=provider, resource_name=node, x_instance_type=sku)
        JobRecord.objects.create(
            batch=jobs, cluster="c1", job_id=job_id, state="COMPLETED", start=at(0), end=at(1),
            gpus=Decimal(8), nodes=[node], account=account,
        )  # fmt: skip
    line(billing, "10", service_name="S3", tags={"team": "ml"})
    return {"vision": team, "speech": other_team}


def attribute() -> str:
    out = StringIO()
    call_command("attribute", "--month", "2025-06", stdout=out)
    return out.getvalue()


def owners(item: CostLineItem) -> dict[tuple[str, str | None], Decimal]:
    """(category, team slug) -> amount of the ledger rows of lines like `item` (same service,
    provider and sub-account: each test gives its shared lines distinct ones)."""
    result: dict[tuple[str, str | None], Decimal] = {}
    rows = AllocatedCost.objects.filter(
        service_name=item.service_name, provider_name=item.provider_name,
        sub_account_id=item.sub_account_id, node="",
    )  # fmt: skip
    for row in rows.select_related("team"):
        key = (row.category, row.team.slug if row.team else None)
        result[key] = result.get(key, Decimal(0)) + row.amount
    return result


def test_even_splits_among_teams_with_spend(billing: ImportBatch, spend: dict[str, Team]) -> None:
    SharedCostRule.objects.create(name="tax", charge_category="tax", method="even")
    tax = line(billing, "9", charge_category="Tax", service_name="Tax")
    output = attribute()
    # Teams with spend: vision (training), speech (training), ml (tagged): 9 / 3 = 3 each.
    assert owners(tax) == {("shared", "vision"): 3, ("shared", "speech"): 3, ("shared", "ml"): 3}
    assert "difference 0" in output


def test_gpu_spend_is_pro_rata_to_training_on_the_same_provider(
    billing: ImportBatch, spend: dict[str, Team]
) -> None:
    SharedCostRule.objects.create(name="support", service_name="AWS Support", method="gpu_spend")
    support = line(billing, "8", service_name="AWS Support", charge_category="Purchase")
    attribute()
    # AWS training: vision 60, speech 20 -> 8 x 60/80 = 6, 8 x 20/80 = 2; ml has no GPU spend.
    assert owners(support) == {("shared", "vision"): 6, ("shared", "speech"): 2}


def test_gpu_spend_falls_back_to_all_providers_in_the_currency(
    billing: ImportBatch, spend: dict[str, Team]
) -> None:
    SharedCostRule.objects.create(name="azure net", provider_name="Azure", method="gpu_spend")
    network = line(billing, "5", provider_name="Azure", service_name="Bandwidth")
    attribute()
    # No training on Azure: all USD training, vision 60, speech 20 + 40 = 60 -> 2.5 each.
    assert owners(network) == {
        ("shared", "vision"): Decimal("2.5"),
        ("shared", "speech"): Decimal("2.5"),
    }


def test_fixed_percentages(billing: ImportBatch, spend: dict[str, Team]) -> None:
    rule = SharedCostRule.objects.create(
        name="infra", sub_account_id="shared-infra", method="fixed"
    )
    SharedCostSplit.objects.create(rule=rule, team=spend["vision"], percent=Decimal(70))
    SharedCostSplit.objects.create(rule=rule, team=spend["speech"], percent=Decimal(30))
    infra = line(billing, "10", sub_account_id="shared-infra", service_name="VPC")
    attribute()
    assert owners(infra) == {("shared", "vision"): 7, ("shared", "speech"): 3}


def test_first_rule_by_priority_wins_and_unmatched_stays_unallocated(
    billing: ImportBatch, spend: dict[str, Team]
) -> None:
    SharedCostRule.objects.create(name="late", charge_category="Tax", method="even", priority=50)
    SharedCostRule.objects.create(
        name="early", charge_category="Tax", method="gpu_spend", priority=10
    )
    tax = line(billing, "8", charge_category="Tax", service_name="Tax")
    other = line(billing, "4", service_name="CloudWatch")
    attribute()
    # gpu_spend on AWS: 8 x 60/80 = 6, 8 x 20/80 = 2.
    assert owners(tax) == {("shared", "vision"): 6, ("shared", "speech"): 2}
    assert owners(other) == {("unallocated", None): 4}


def test_mapped_lines_are_never_shared(billing: ImportBatch, spend: dict[str, Team]) -> None:
    SharedCostRule.objects.create(name="all", method="even")
    tagged = line(billing, "3", service_name="EFS", tags={"team": "vision"})
    attribute()
    assert owners(tagged) == {("tagged", "vision"): 3}
    # Nor are GPU node lines (their rest is idle, not unallocated).
    assert not AllocatedCost.objects.filter(category="shared").exclude(node="").exists()


def test_credit_is_shared_with_its_sign_and_rounded_per_line(
    billing: ImportBatch, spend: dict[str, Team]
) -> None:
    SharedCostRule.objects.create(name="credits", charge_category="Credit", method="even")
    credit = line(billing, "-1", charge_category="Credit", service_name="Credits")
    attribute()
    # -1 over 3 teams: floors 333333333333 units each, the last unit to the first team by id.
    third = Decimal("-0.333333333333")
    first = min(spend["vision"].pk, spend["speech"].pk, Team.objects.get(slug="ml").pk)
    by_id = {Team.objects.get(slug=slug).pk: amount for (_, slug), amount in owners(credit).items()}
    assert by_id == {pk: (third - QUANTUM if pk == first else third) for pk in by_id}
    assert sum(by_id.values()) == Decimal(-1)
    assert len(by_id) == 3


def test_no_teams_to_share_with_stays_unallocated(billing: ImportBatch) -> None:
    SharedCostRule.objects.create(name="tax", charge_category="Tax", method="even")
    SharedCostRule.objects.create(name="support", service_name="Support", method="gpu_spend")
    tax = line(billing, "9", charge_category="Tax", service_name="Tax")
    support = line(billing, "4", service_name="Support")
    output = attribute()
    assert owners(tax) == {("unallocated", None): 9}
    assert owners(support) == {("unallocated", None): 4}
    assert "difference 0" in output


def test_line_over_several_days_is_shared_day_by_day_exactly(
    billing: ImportBatch, spend: dict[str, Team]
) -> None:
    SharedCostRule.objects.create(name="tax", charge_category="Tax", method="even")
    # $10 over 36 h: 6.666666666667 on 06-03 and 3.333333333333 on 06-04 (engine rounding by
    # seconds), each day split 3 ways.
    tax = line(billing, "10", charge_category="Tax", service_name="Tax", charge_period_end=at(36))
    attribute()
    rows = AllocatedCost.objects.filter(service_name="Tax")
    assert {r.category for r in rows} == {"shared"}
    per_day: dict[dt.date, Decimal] = {}
    for row in rows:
        per_day[row.day] = per_day.get(row.day, Decimal(0)) + row.amount
    assert per_day == {
        dt.date(2025, 6, 3): Decimal("6.666666666667"),
        dt.date(2025, 6, 4): Decimal("3.333333333333"),
    }
    assert sum(owners(tax).values()) == Decimal(10)
