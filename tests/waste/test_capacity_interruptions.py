"""The capacity-only interruption rate beside the interruption rate (issue 31 follow-up): a spot
decision weighs the GPUs taken back (PREEMPTED) or lost with their node (NODE_FAIL), not the
job's own failures (FAILED, OUT_OF_MEMORY), which happen on any pricing. Hand-worked on
fixtures/recommendations/focus-slurm-spot-interruptions (README.md there): vision's spot jobs
on hpc lose capacity 4 times in 48 GPU-hours (83.333 per 1,000, all their interruptions); its
on-demand jobs' one interruption is job 503 FAILED, so their capacity rate is 0.000 beside
15.625; speech's committed job 0.000. Stored advice and read-time advice say the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from finops.economics.models import CheckpointAdviceMonth, CheckpointAdviceRow
from finops.org.models import Profile, Team
from tests.scenario_setup import FIXTURES, scenario_load

pytestmark = pytest.mark.django_db
FOLDER = FIXTURES / "recommendations" / "focus-slurm-spot-interruptions"
EXPECTED: dict[str, Any] = json.loads((FOLDER / "expected.json").read_text())
# (team, pricing) -> (interruptions, per 1,000, capacity interruptions, capacity per 1,000)
HAND = {
    ("speech", "commitment"): (0, "0.000", 0, "0.000"),
    ("vision", "spot"): (4, "83.333", 4, "83.333"),
    ("vision", "on_demand"): (1, "15.625", 0, "0.000"),
}


@pytest.fixture
def scene(tmp_path: Path) -> None:
    scenario_load(FOLDER, tmp_path)


def _advice(user: User) -> dict[tuple[str, str], tuple[int, str, int, str]]:
    api = APIClient()
    api.force_authenticate(user)
    answer = api.get("/api/v1/waste/advice/", {"month": EXPECTED["month"]})
    assert answer.status_code == 200, answer.content
    return {
        (r["team"], r["pricing"]): (
            r["interruptions"],
            r["interruptions_per_1000_gpu_hours"],
            r["capacity_interruptions"],
            r["capacity_interruptions_per_1000_gpu_hours"],
        )
        for r in answer.json()
    }


def test_capacity_rate_counts_preempted_and_node_fail_only(scene: None, finance_user: User) -> None:
    # The pipeline stored the month's advice with the capacity figures.
    stored = {
        (row.team.slug if row.team else None, row.pricing): (
            row.capacity_interruptions,
            f"{row.capacity_interruptions_per_thousand_gpu_hours:f}",
        )
        for row in CheckpointAdviceRow.objects.select_related("team")
    }
    assert stored == {key: (hand[2], hand[3]) for key, hand in HAND.items()}
    assert _advice(finance_user) == HAND
    # Not stored (a month rolled up before the figures existed): computed at read time, same.
    CheckpointAdviceMonth.objects.all().delete()
    assert _advice(finance_user) == HAND


def test_the_team_page_shows_the_capacity_rate_beside_the_rate(scene: None, client: Client) -> None:
    lead = User.objects.create_user("vision-lead")
    Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD).teams.add(
        Team.objects.get(slug="vision")
    )
    client.force_login(lead)
    page = client.get("/teams/vision/", {"month": EXPECTED["month"]})
    assert page.status_code == 200
    html = page.content.decode()
    table = html[html.index('data-testid="checkpoint-advice"') :]
    table = table[: table.index("</table>")]
    assert "Capacity loss per 1,000 GPU-hours" in table
    on_demand = table[table.index('data-pricing="on_demand"') :]
    on_demand = on_demand[: on_demand.index("</tr>")]
    cell = on_demand[on_demand.index('data-testid="capacity-per-1000"') :]
    assert cell[: cell.index("</td>")].endswith('>0 <span class="muted">(0)</span>')
    spot = table[table.index('data-pricing="spot"') :]
    spot = spot[: spot.index("</tr>")]
    cell = spot[spot.index('data-testid="capacity-per-1000"') :]
    assert cell[: cell.index("</td>")].endswith('>83.333 <span class="muted">(4)</span>')
