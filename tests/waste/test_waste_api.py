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
from finops.pricing.models import PricingAssumptions
from tests.scenario_setup import SCENARIOS, load_setup, run_command

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


def test_checkpoint_advice_of_the_scenario(scene: None, finance_user: User) -> None:
    """Hand-worked (fixtures/scenarios/focus-slurm-waste/README.md, "What to change").

    vision on hpc: attempts 401/1 (REQUEUED, 1 h), 401/2 (2 h), 404 (FAILED, 0.75 h), 405
    (CANCELLED, 0.5 h): 4.25 h, 34 GPU-hours, 340 USD, 2 interruptions -> 2 / 34 = 0.058824 per
    GPU-hour, mean time between them 2.125 h = 127.5 min. Checkpoints every 30 min in the
    metrics. Write time 2 min: tau* = sqrt(2 x 2 x 127.5) = sqrt(510) = 22.58 min; loss at 30 =
    2/30 + 30/255 = 0.184314, at tau* = 2 x sqrt(2/255) = 0.177123: 340 x 0.007191 = 2.44 USD.
    speech on hpc: 402 (FAILED, 1 h) and 403 (1.5 h, 75 % used): 2.5 h, 20 GPU-hours, 200 USD,
    1 interruption (0.05 per GPU-hour), 150 min apart; no metrics: the assumed 24 min; tau* =
    sqrt(600) = 24.49 min; 200 x (2/24 + 24/300 - 2 sqrt(2/300)) = 0.0068 USD; utilisation
    0.75 and 25 USD idle in the allocation."""
    answer = _client(finance_user).get("/api/v1/waste/advice/", {"month": "2025-06"})
    rows = {r["team"]: r for r in answer.json()}
    vision, speech = rows["vision"], rows["speech"]
    assert (vision["interruptions"], vision["interruptions_per_gpu_hour"]) == (2, "0.058824")
    assert (vision["gpu_hours"], vision["mean_hours_between_interruptions"]) == (
        "34.0000",
        "2.1250",
    )
    assert (vision["current_interval_minutes"], vision["current_interval_source"]) == (
        "30.00",
        "metrics",
    )
    assert vision["optimal_interval_minutes"] == "22.58"
    assert Decimal(vision["monthly_saving"]).quantize(Decimal("0.01")) == Decimal("2.44")
    assert vision["measured_utilisation"] is None
    assert (speech["current_interval_source"], speech["optimal_interval_minutes"]) == (
        "assumption",
        "24.49",
    )
    assert Decimal(speech["monthly_saving"]).quantize(Decimal("0.0001")) == Decimal("0.0068")
    assert (speech["measured_utilisation"], Decimal(speech["idle_in_allocation"])) == ("0.7500", 25)
    # Every node is billed Standard: one row per team, its pricing category on demand.
    assert (vision["pricing"], speech["pricing"]) == ("on_demand", "on_demand")
    assert vision["interruptions_per_1000_gpu_hours"] == "58.824"
    assert (
        "Checkpoint on-demand jobs every 23 minutes instead of 30: saves 2.44 USD"
        in (vision["action"])
    )
    assert speech["action"].startswith("Keep checkpointing on-demand jobs every 24 minutes")


def test_advice_with_a_zero_checkpoint_interval_claims_no_saving(
    scene: None, finance_user: User
) -> None:
    """The assumptions allow a 0-minute interval (their bound): no division by it (a 500 the
    schemathesis fuzz found), the interval is advised and no saving claimed."""
    PricingAssumptions.objects.filter(pk=1).update(checkpoint_interval_minutes=0)
    answer = _client(finance_user).get("/api/v1/waste/advice/", {"month": "2025-06"})
    assert answer.status_code == 200
    speech = {r["team"]: r for r in answer.json()}["speech"]
    assert (speech["current_interval_minutes"], speech["optimal_interval_minutes"]) == (
        "0.00",
        "24.49",
    )
    assert Decimal(speech["monthly_saving"]) == 0
