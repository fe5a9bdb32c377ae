"""Mapping-rule dry run: what a proposed, edited or deleted rule would move, writing nothing."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import TypedDict

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from billing_ingest.models import CostLineItem, JobRecord
from finops.attribution.models import AllocatedCost, AttributionRun, Category
from finops.attribution.selectors.rule_preview import Move, mapping_rule_preview
from finops.org.models import MappingRule, Team
from tests.factories import (
    MONTH,
    AllocatedCostFactory,
    CostLineItemFactory,
    ImportBatchFactory,
    JobRecordFactory,
)


class PreviewMonth(TypedDict):
    alpha: list[CostLineItem]
    physics: list[JobRecord]
    physics_team: Team


@pytest.fixture
def month(db: None) -> PreviewMonth:
    """A month attribution ran for: lines tagged project=alpha with no team (unallocated), a
    line with team=vision (convention), Slurm jobs of account `physics` (auto team `physics`)
    and one of account `chem`, each with ledger cost."""
    AttributionRun.objects.create(billing_period=MONTH, status=AttributionRun.Status.SUCCEEDED)
    # An older month attributed too: the preview must pick the latest.
    AttributionRun.objects.create(
        billing_period=dt.date(2025, 8, 1), status=AttributionRun.Status.SUCCEEDED
    )
    batch = ImportBatchFactory.create()
    alpha = [
        CostLineItemFactory.create(
            batch=batch, tags={"project": "alpha"}, effective_cost=Decimal(c)
        )
        for c in ("12.5", "0.000000000001")
    ]
    CostLineItemFactory.create(batch=batch, tags={"project": "beta"}, effective_cost=Decimal("7"))
    CostLineItemFactory.create(
        batch=batch, tags={"project": "alpha", "team": "Vision"}, effective_cost=Decimal("3")
    )
    physics_team = Team.objects.create(slug="physics", name="physics")
    physics = [JobRecordFactory.create(account="physics") for _ in range(2)]
    chem = JobRecordFactory.create(account="chem")
    for job, amounts in zip(physics, (("100", "0.25"), ("40",)), strict=True):
        for amount in amounts:
            AllocatedCostFactory.create(job=job, team=physics_team, amount=Decimal(amount))
    AllocatedCostFactory.create(job=chem, team=Team.objects.create(slug="chem", name="chem"))
    AllocatedCostFactory.create(
        team=None, category=Category.UNALLOCATED, amount=Decimal("12.500000000001")
    )
    return {"alpha": alpha, "physics": physics, "physics_team": physics_team}


_MODELS = (CostLineItem, JobRecord, AllocatedCost, Team, MappingRule, AttributionRun)


def _snapshot() -> tuple[object, ...]:
    """Row counts and exact sums of everything a preview could touch."""
    return (
        {m.__name__: m.objects.count() for m in _MODELS},
        sum((a.amount for a in AllocatedCost.objects.all()), Decimal(0)),
        sorted(AllocatedCost.objects.values_list("id", "team_id", "amount")),
        sorted(Team.objects.values_list("id", "slug")),
        sorted(MappingRule.objects.values_list("id", "kind", "key", "value", "team_id")),
    )


def test_new_tag_rule_moves_tagged_lines_from_unallocated(month: PreviewMonth, team: Team) -> None:
    before = _snapshot()
    preview = mapping_rule_preview(
        rule_data={"kind": "tag", "key": "project", "value": "alpha", "team": team, "priority": 50},
        month=None,
    )
    assert preview.month == MONTH  # the latest attributed month
    expected = sum((li.effective_cost for li in month["alpha"]), Decimal(0))
    # The alpha line tagged team=Vision is Vision's either way: it does not move.
    assert preview.lines == [Move(None, "vision", "USD", 2, expected)]
    assert preview.jobs == []  # a line rule cannot move jobs
    assert _snapshot() == before


def test_tag_rule_priority_against_team_tag(
    month: PreviewMonth, team: Team, other_team: Team
) -> None:
    # Mapping rules come before the team-tag convention: the Vision-tagged alpha line moves too.
    preview = mapping_rule_preview(
        rule_data={"kind": "tag", "key": "project", "value": "alpha", "team": other_team.pk},
        month=MONTH,
    )
    alpha = sum((li.effective_cost for li in month["alpha"]), Decimal(0))
    assert preview.lines == [
        Move(None, "speech", "USD", 2, alpha),
        Move("vision", "speech", "USD", 1, Decimal("3")),
    ]
    # An existing rule already mapping alpha (lower priority number) wins: nothing moves.
    MappingRule.objects.create(kind="tag", key="project", value="alpha", team=team, priority=1)
    preview = mapping_rule_preview(
        rule_data={"kind": "tag", "key": "project", "value": "alpha", "team": other_team.pk},
        month=MONTH,
    )
    assert preview.lines == []
    assert not preview.moves_anything


def test_slurm_account_rule_moves_jobs_from_auto_team(
    month: PreviewMonth, other_team: Team
) -> None:
    before = _snapshot()
    preview = mapping_rule_preview(
        rule_data={"kind": "slurm_account", "value": "physics", "team": other_team},
        month=MONTH,
    )
    ledger = sum(
        (a.amount for a in AllocatedCost.objects.filter(job__in=month["physics"])), Decimal(0)
    )
    assert ledger == Decimal("140.25")
    assert preview.jobs == [Move("physics", "speech", "USD", 2, ledger)]
    assert preview.lines == []  # a job rule cannot move line items
    assert preview.team_names == {"physics": "physics", "speech": "Speech"}
    assert _snapshot() == before


def test_deleting_a_rule_previews_the_way_back(month: PreviewMonth, other_team: Team) -> None:
    rule = MappingRule.objects.create(kind="slurm_account", value="physics", team=other_team)
    before = _snapshot()
    preview = mapping_rule_preview(rule_data={"id": rule.pk, "delete": True}, month=MONTH)
    assert [(m.from_team, m.to_team, m.count) for m in preview.jobs] == [("speech", "physics", 2)]
    assert _snapshot() == before


def test_editing_a_rule_replaces_it(month: PreviewMonth, team: Team, other_team: Team) -> None:
    # Editing the physics rule into a chem rule: physics jobs go back, chem jobs move.
    rule = MappingRule.objects.create(kind="slurm_account", value="physics", team=other_team)
    preview = mapping_rule_preview(
        rule_data={"id": rule.pk, "kind": "slurm_account", "value": "chem", "team": other_team},
        month=MONTH,
    )
    assert [(m.from_team, m.to_team, m.count, m.amount) for m in preview.jobs] == [
        ("chem", "speech", 1, Decimal("1")),
        ("speech", "physics", 2, Decimal("140.25")),
    ]


def test_convention_team_that_does_not_exist_is_not_created(month: PreviewMonth) -> None:
    # Deleting the only rule for a tag whose value names no team yet: that team is reported new.
    CostLineItemFactory.create(tags={"team": "Robotics", "project": "gamma"})
    rule = MappingRule.objects.create(
        kind="tag", key="project", value="gamma", team=Team.objects.get(slug="chem")
    )
    preview = mapping_rule_preview(rule_data={"id": rule.pk, "delete": True}, month=MONTH)
    assert [(m.from_team, m.to_team) for m in preview.lines] == [("chem", "robotics")]
    assert preview.new_teams == {"robotics"}
    assert not Team.objects.filter(slug="robotics").exists()


def test_no_attributed_month(db: None, team: Team) -> None:
    preview = mapping_rule_preview(
        rule_data={"kind": "tag", "key": "k", "value": "v", "team": team}, month=None
    )
    assert preview.month is None
    assert not preview.moves_anything


# --- admin ----------------------------------------------------------------------------------


@pytest.fixture
def admin_client(client: Client, db: None) -> Client:
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-root-123"))
    return client


def test_admin_preview_button_shows_moves_and_saves_nothing(
    admin_client: Client, month: PreviewMonth, team: Team
) -> None:
    add_url = reverse("admin:org_mappingrule_add")
    assert 'name="_preview"' in admin_client.get(add_url).content.decode()
    before = _snapshot()
    response = admin_client.post(
        reverse("admin:org_mappingrule_preview"),
        {"kind": "tag", "key": "project", "value": "alpha", "team": team.pk, "priority": 100},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="preview-lines"' in html
    assert "Vision" in html
    # 12.500000000001 in the ledger, shown to the cent by the one money formatter.
    assert ">12.50<" in html
    assert _snapshot() == before


def test_admin_delete_page_shows_preview(
    admin_client: Client, month: PreviewMonth, other_team: Team
) -> None:
    rule = MappingRule.objects.create(kind="slurm_account", value="physics", team=other_team)
    response = admin_client.get(reverse("admin:org_mappingrule_delete", args=[rule.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-testid="preview-jobs"' in html
    assert ">140.25<" in html


def test_admin_preview_of_an_edit_and_invalid_form(
    admin_client: Client, month: PreviewMonth, team: Team, other_team: Team
) -> None:
    rule = MappingRule.objects.create(kind="slurm_account", value="physics", team=other_team)
    change = admin_client.get(reverse("admin:org_mappingrule_change", args=[rule.pk]))
    assert f"preview/?rule={rule.pk}" in change.content.decode()
    before = _snapshot()
    url = reverse("admin:org_mappingrule_preview") + f"?rule={rule.pk}"
    data = {"kind": "slurm_account", "key": "", "value": "physics", "team": team.pk, "priority": 5}
    html = admin_client.post(url, data).content.decode()
    assert 'data-testid="preview-jobs"' in html
    assert ">140.25<" in html
    assert f'action="{reverse("admin:org_mappingrule_change", args=[rule.pk])}"' in html
    invalid = admin_client.post(url, {**data, "team": ""}).content.decode()
    assert "errornote" in invalid
    assert "preview-jobs" not in invalid
    assert admin_client.get(url).status_code == 405  # previews are posted forms
    assert _snapshot() == before
