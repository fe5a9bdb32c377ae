"""Service jobs get no checkpoint advice and no rework, restart or abandoned waste; their idle
in allocation stays, on the hand-worked scenario fixtures/scenarios/focus-slurm-service
(README.md there): speech's GPU CI runner `ci-runner` (jobs 501 NODE_FAIL, 502, both marked
service) beside vision's training run `pretrain` (511 PREEMPTED, resumed by 512)."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from django.test import Client

from billing_ingest.models import JobRecord
from finops.economics.advice import stored_advice, stored_waste_drafts
from finops.org.models import Team
from finops.waste.recommendations import waste_drafts
from tests.scenario_setup import SCENARIOS, load_setup, run_command

FOLDER = SCENARIOS / "focus-slurm-service"
MONTH = date(2025, 6, 1)

pytestmark = pytest.mark.django_db


@pytest.fixture
def scene(tmp_path: Path) -> None:
    setup = json.loads((FOLDER / "setup.json").read_text())
    load_setup(setup, tmp_path)
    for command in setup["commands"]:
        run_command(FOLDER, command)
    run_command(FOLDER, ["attribute", "--month", "2025-06"])


def test_the_sacct_comments_mark_the_runner_a_service(scene: None) -> None:
    assert dict(JobRecord.objects.values_list("job_id", "service")) == {
        "501": True, "502": True, "511": False, "512": False,
    }  # fmt: skip


def test_the_service_gets_no_checkpoint_recommendation_but_its_idle_one(scene: None) -> None:
    slugs: dict[int | None, str] = dict(Team.objects.values_list("id", "slug"))
    assert stored_advice(month=MONTH) is not None  # the pipeline stored it: read from there
    drafts = stored_waste_drafts(month=MONTH)
    assert drafts == waste_drafts(month=MONTH)
    found = {(slugs[d.team_id], d.kind, d.key): d.monthly_savings for d in drafts}
    # README.md: no "checkpoint every ... instead of ..." for the runner (it would have been
    # sqrt(2 x 2 x 360) = 37.95 minutes against 24); its 240.00 USD of idle GPUs stay advice.
    assert ("speech", "checkpoint", "checkpoint:hpc:service") not in found
    assert not any(team == "speech" and kind == "checkpoint" for team, kind, _ in found)
    assert found[("speech", "idle", "allocation:hpc")] == Decimal("240.00")
    # The training run's checkpoint advice is still there: 0.2229 USD, 0.22 to the cent.
    assert found[("vision", "checkpoint", "checkpoint:hpc:on_demand")] == Decimal("0.22")
    assert all("write no checkpoints" not in d.action for d in drafts)


def test_the_team_page_shows_the_service_row_without_an_interval(
    scene: None, finance_client: Client
) -> None:
    page = finance_client.get("/teams/speech/", {"month": "2025-06"})
    assert page.status_code == 200
    html = page.content.decode()
    table = html[html.index('data-testid="checkpoint-advice"') :]
    row = table[table.index('data-pricing="service"') :]
    row = row[: row.index("</tr>")]
    assert "write no checkpoints: no checkpoint advice" in row
    assert "Checkpoint service jobs every" not in row
    assert " min " not in row  # no current interval, no Young/Daly interval
    assert "240.00 USD of allocated GPU time was idle" in row
