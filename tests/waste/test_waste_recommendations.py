"""Waste advice as recommendations (issue 31 item 3) on `GET /api/v1/recommendations/` (DESIGN
section 10), with the pricing ones' status flow, on the hand-worked scenario
fixtures/scenarios/focus-slurm-waste (README.md there, "What to change"; the arithmetic is in
tests/waste/test_waste_api.py::test_checkpoint_advice_of_the_scenario): vision on hpc should
checkpoint every 22.58 minutes instead of 30, saving 2.44 USD a month; speech's job 403 used 75 %
of its GPUs, 25 USD of allocated GPU time idle; speech's own checkpoint saving (0.0068 USD) is
below a cent, so no action."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from finops.org.models import Profile, Team
from tests.scenario_setup import SCENARIOS, scenario_load

pytestmark = pytest.mark.django_db
FOLDER = SCENARIOS / "focus-slurm-waste"


@pytest.fixture
def scene(tmp_path: Path) -> None:
    scenario_load(FOLDER, tmp_path, months=["2025-06"])


def _waste_actions(api: APIClient) -> dict[tuple[str, str], dict[str, Any]]:
    answer = api.get("/api/v1/recommendations/", {"month": "2025-06"})
    assert answer.status_code == 200, answer.content
    body = answer.json()
    rows = body["results"] if isinstance(body, dict) else body
    return {
        (r["team"], r["kind"]): r
        for r in rows
        if r["kind"] == "checkpoint" or "idle_in_allocation" in r["evidence"]
    }


# Savings of cents to a few USD: the materiality floor off (test_advice_floor.py has it).
@override_settings(FINOPS_ADVICE_MIN_MONTHLY_SAVING=0)
def test_checkpoint_and_idle_allocation_advice_are_recommendations(
    scene: None, finance_user: User
) -> None:
    api = APIClient()
    api.force_authenticate(finance_user)
    actions = _waste_actions(api)
    assert set(actions) == {("vision", "checkpoint"), ("speech", "idle")}
    checkpoint = actions[("vision", "checkpoint")]
    assert (checkpoint["monthly_savings"], checkpoint["currency"]) == ("2.44", "USD")
    assert checkpoint["title"] == "Checkpoint on-demand jobs on hpc every 23 minutes"
    assert checkpoint["assumptions"]["optimal_interval_minutes"] == "22.58"
    assert checkpoint["assumptions"]["current_interval_minutes"] == "30.00"
    assert checkpoint["assumptions"]["checkpoint_write_minutes"] == "2"
    assert "Young/Daly" in checkpoint["assumptions"]["formula"]
    assert checkpoint["evidence"]["interruptions_per_gpu_hour"] == "0.058824"
    assert checkpoint["evidence"]["interruptions_per_1000_gpu_hours"] == "58.824"
    assert checkpoint["evidence"]["pricing"] == "on_demand"
    assert checkpoint["status"] == "open"
    idle = actions[("speech", "idle")]
    assert (Decimal(idle["monthly_savings"]), idle["evidence"]["cluster"]) == (25, "hpc")
    assert idle["title"] == "Jobs on hpc used 75 % of their GPUs"
    assert "25.00 USD of allocated GPU time was idle" in idle["action"]
    assert idle["assumptions"]["measured_utilisation"] == "0.7500"


def test_a_lead_sees_and_settles_their_teams_advice(scene: None) -> None:
    lead = User.objects.create_user("speech-lead")
    profile = Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD)
    profile.teams.add(Team.objects.get(slug="speech"))
    api = APIClient()
    api.force_authenticate(lead)
    actions = _waste_actions(api)
    assert set(actions) == {("speech", "idle")}
    url = f"/api/v1/recommendations/{actions[('speech', 'idle')]['id']}/"
    answer = api.patch(url, {"status": "done", "comment": "4 GPUs per job now"}, format="json")
    assert answer.status_code == 200, answer.content
    # A recompute (the month's inputs moved) keeps the status and the comment.
    from datetime import date

    from finops.pricing.recommendations import recommendations_refresh

    recommendations_refresh(month=date(2025, 6, 1))
    again = _waste_actions(api)[("speech", "idle")]
    assert (again["status"], again["comment"]) == ("done", "4 GPUs per job now")
