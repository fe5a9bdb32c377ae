"""Service jobs get no checkpoint advice and no rework, restart or abandoned waste; their idle
in allocation stays, on the hand-worked scenario fixtures/scenarios/focus-slurm-service
(README.md there): speech's GPU CI runner `ci-runner` (jobs 501 NODE_FAIL, 502, both marked
service) beside vision's training run `pretrain` (511 PREEMPTED, resumed by 512)."""

from __future__ import annotations

import datetime as dt
from datetime import date
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from django.test import Client, override_settings

from billing_ingest.models import JobRecord
from finops.economics.advice import stored_advice, stored_waste_drafts
from finops.org.models import Team
from finops.waste.causes import AttemptTimes, Settings, attempt_shares
from finops.waste.recommendations import waste_drafts
from tests.scenario_setup import SCENARIOS, scenario_load

FOLDER = SCENARIOS / "focus-slurm-service"
MONTH = date(2025, 6, 1)

pytestmark = pytest.mark.django_db


@pytest.fixture
def scene(tmp_path: Path) -> None:
    scenario_load(FOLDER, tmp_path, months=["2025-06"])


def test_the_sacct_comments_mark_the_runner_a_service(scene: None) -> None:
    assert dict(JobRecord.objects.values_list("job_id", "service")) == {
        "501": True, "502": True, "511": False, "512": False,
    }  # fmt: skip


# Savings of cents to a few USD: the materiality floor off (test_advice_floor.py has it).
@override_settings(FINOPS_ADVICE_MIN_MONTHLY_SAVING=0)
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


def _at(hour: int) -> dt.datetime:
    return dt.datetime(2025, 6, 3, hour, tzinfo=dt.UTC)


def test_a_service_attempt_has_only_idle_and_only_once_it_has_ended() -> None:
    """Pure: an interrupted service never resumed is not abandoned, one resumed leaves no
    rework and its successor no restart; 25 % used: 3/4 of its cost idle, whole (no restart
    window to leave out), none while it runs (as a training attempt's)."""
    settings = Settings(checkpoint_interval_minutes=Decimal(24), restart_minutes=Decimal(15))
    quarter = Fraction(1, 4)
    attempts = [
        AttemptTimes(1, "NODE_FAIL", _at(10), _at(12), service=True),
        AttemptTimes(2, "COMPLETED", _at(12), _at(16), quarter, service=True),
        AttemptTimes(3, "FAILED", _at(16), _at(17), quarter, service=True),
        # Started before 3 ended: 3 is resumed by no one (a training run's would be abandoned).
        AttemptTimes(4, "RUNNING", _at(16), None, quarter, service=True),
    ]
    shares = {s.pk: s for s in attempt_shares(attempts, metrics=None, settings=settings)}
    for pk in (1, 2, 3, 4):
        assert shares[pk].shares["rework"] == 0
        assert shares[pk].shares["restart"] == 0
        assert shares[pk].shares["abandoned"] == 0
        assert not shares[pk].resumed
        assert not shares[pk].estimated
    assert shares[1].shares["idle_in_allocation"] == 0  # not measured
    assert shares[2].shares["idle_in_allocation"] == Fraction(3, 4)
    assert shares[3].shares["idle_in_allocation"] == Fraction(3, 4)
    assert shares[4].shares["idle_in_allocation"] == 0  # still running
    # The same attempts as a training run: rework, restart, abandoned.
    training = [AttemptTimes(a.pk, a.state, a.start, a.end, a.utilisation) for a in attempts]
    shares = {s.pk: s for s in attempt_shares(training, metrics=None, settings=settings)}
    assert shares[1].shares["rework"] > 0
    assert shares[2].shares["restart"] > 0
    assert shares[3].shares["abandoned"] == 1
