"""Waste on the API (issue 31): the month view's access, filters and validation, and the run
detail's `waste` object, on the hand-worked scenario fixtures/scenarios/focus-slurm-waste."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from finops.org.models import Team
from tests.test_fixture_scenarios import SCENARIOS, load_setup, run_command

FOLDER = SCENARIOS / "focus-slurm-waste"


@pytest.fixture
def scene(tmp_path: Path, team: Team, other_team: Team) -> None:
    setup = json.loads((FOLDER / "setup.json").read_text())
    load_setup({**setup, "fixtures": []}, tmp_path)
    for command in setup["commands"]:
        run_command(FOLDER, command)
    run_command(FOLDER, ["attribute", "--month", "2025-06"])


def _client(user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def test_a_lead_sees_only_the_waste_of_their_teams(scene: None, lead_user: User) -> None:
    rows = _client(lead_user).get("/api/v1/waste/", {"month": "2025-06"}).json()
    assert [(r["team"], Decimal(r["total"]), Decimal(r["cancelled"])) for r in rows] == [
        ("vision", Decimal(88), Decimal(40))
    ]
    answer = _client(lead_user).get("/api/v1/waste/", {"month": "2025-06", "team": "speech"})
    assert answer.status_code == 404


def test_finance_narrows_to_a_team(scene: None, finance_user: User) -> None:
    rows = _client(finance_user).get("/api/v1/waste/", {"month": "2025-06", "team": "speech"})
    [speech] = rows.json()
    assert speech["team"] == "speech"
    assert (Decimal(speech["rework"]), Decimal(speech["restart"])) == (16, 20)
    assert speech["estimated"] is True


@pytest.mark.parametrize(
    "params", [{}, {"month": "2025-13"}, {"month": "0000-01"}, {"month": "2025-06", "team": "a b"}]
)
def test_bad_queries_are_400(finance_user: User, params: dict[str, str]) -> None:
    assert _client(finance_user).get("/api/v1/waste/", params).status_code == 400


def test_a_month_without_runs_is_an_empty_list(finance_user: User) -> None:
    answer = _client(finance_user).get("/api/v1/waste/", {"month": "2024-01"})
    assert (answer.status_code, answer.json()) == (200, [])


def test_the_run_detail_names_the_assumptions_of_its_estimates(
    scene: None, finance_user: User
) -> None:
    api = _client(finance_user)
    runs = {
        r["run_id"]: r for r in api.get("/api/v1/runs/", {"month": "2025-06"}).json()["results"]
    }
    waste = api.get(runs["finetune"]["url"]).json()["waste"]
    assert waste["assumptions"] == {
        "checkpoint_interval_minutes": "24.00",
        "restart_minutes": "15.00",
        "has_metrics": False,
    }
    assert waste["estimated_causes"] == ["restart", "rework"]
    # Every figure is a plain decimal string in the run's currency, never with an exponent.
    assert waste["currency"] == "USD"
    assert all("E" not in waste[k] for k in ("total", "rework", "restart", "cancelled"))
    pretrain = api.get(runs["pretrain"]["url"]).json()["waste"]
    assert pretrain["assumptions"]["has_metrics"] is True
    assert pretrain["estimated"] is False
