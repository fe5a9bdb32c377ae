"""The checkpoint advice stored by the run-economics step (issue 29: cold pages): the rows read
back are the read-time checkpoint_advice's, value and places, for finance, a lead and one
team; a settings change, a partial refresh (run metrics imported) and a deleted month; the API
reads the stored rows. On the hand-worked scenario fixtures/scenarios/focus-slurm-waste
(tests/waste/test_waste_api.py has its figures: vision saves 2.44 USD at 22.58 minutes)."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django import DjangoAssertNumQueries
from rest_framework.test import APIClient

from finops.attribution.models import RunCost
from finops.economics.advice_selectors import (
    ADVICE_VERSION,
    checkpoint_advice_stored,
    stamp_version,
)
from finops.economics.models import CheckpointAdviceMonth, CheckpointAdviceRow
from finops.economics.services import economics_delete_month, economics_refresh
from finops.org.models import Team
from finops.pricing.models import PricingAssumptions
from finops.waste.advice import CheckpointAdvice, checkpoint_advice
from tests.query_budgets import STORED_CHECKPOINT_ADVICE_QUERIES
from tests.scenario_setup import SCENARIOS, load_setup, run_command

MONTH = date(2025, 6, 1)
FOLDER = SCENARIOS / "focus-slurm-waste"

pytestmark = pytest.mark.django_db


@pytest.fixture
def scene(tmp_path: Path, team: Team, other_team: Team) -> None:
    """The scenario attributed through the pipeline (its run-economics step stores the advice)."""
    setup = json.loads((FOLDER / "setup.json").read_text())
    load_setup({**setup, "fixtures": []}, tmp_path)
    for command in setup["commands"]:
        run_command(FOLDER, command)
    run_command(FOLDER, ["attribute", "--month", "2025-06"])


def _text(rows: list[CheckpointAdvice]) -> list[tuple[str, ...]]:
    """Every field as text: equal Decimals with other places (2.4 and 2.40) differ here."""
    return [tuple(str(getattr(r, f.name)) for f in fields(r)) for r in rows]


SCOPES = [("all", True), ("all", False), ("vision", False), ("speech", True)]


@pytest.mark.parametrize(("scope", "unowned"), SCOPES)
def test_the_stored_advice_is_the_read_time_advice(scene: None, scope: str, unowned: bool) -> None:
    teams = Team.objects.all() if scope == "all" else Team.objects.filter(slug=scope)
    stored = checkpoint_advice_stored(month=MONTH, teams=teams, include_unowned=unowned)
    reference = checkpoint_advice(month=MONTH, teams=teams, include_unowned=unowned)
    assert stored is not None, "stored by the pipeline's run-economics step"
    assert stored, "the scenario's month has advice"
    assert stored == reference
    assert _text(stored) == _text(reference)


def test_the_hand_worked_figures_come_back(scene: None) -> None:
    rows = checkpoint_advice_stored(month=MONTH, teams=Team.objects.all(), include_unowned=True)
    assert rows is not None
    by_team = {r.team.slug if r.team else None: r for r in rows}
    vision, speech = by_team["vision"], by_team["speech"]
    assert (vision.optimal_interval_minutes, vision.current_interval_minutes) == (
        Decimal("22.58"),
        Decimal("30.00"),
    )
    assert vision.monthly_saving.quantize(Decimal("0.01")) == Decimal("2.44")
    assert (speech.measured_utilisation, speech.idle_in_allocation) == (Decimal("0.7500"), 25)
    assert speech.current_interval_source == "assumption"


def test_other_settings_than_the_stored_ones_are_computed_at_read_time(scene: None) -> None:
    """A change of the pricing assumptions' checkpoint interval: the stored rows are of the old
    one, so the reader gives None and the API computes (speech's assumed interval is now 0)."""
    PricingAssumptions.objects.filter(pk=1).update(checkpoint_interval_minutes=0)
    assert (
        checkpoint_advice_stored(month=MONTH, teams=Team.objects.all(), include_unowned=True)
        is None
    )
    economics_refresh(month=MONTH)
    rows = checkpoint_advice_stored(month=MONTH, teams=Team.objects.all(), include_unowned=True)
    assert rows is not None
    speech = next(r for r in rows if r.team and r.team.slug == "speech")
    assert (speech.current_interval_minutes, speech.monthly_saving) == (0, 0)


def test_rows_stored_by_other_code_are_computed_at_read_time(scene: None) -> None:
    """After a deployment that changes what the advice holds (ADVICE_VERSION), the rows the old
    code stored are not shown: the reader gives None (the caller computes) until the month's
    run_economics runs again; a month stored without a stamp likewise."""
    teams = Team.objects.all()
    header = CheckpointAdviceMonth.objects.get(billing_period=MONTH)
    assert stamp_version(header.stamp) == ADVICE_VERSION
    older = f"{int(ADVICE_VERSION) - 1}|{header.stamp.split('|', 1)[1]}"
    CheckpointAdviceMonth.objects.filter(pk=header.pk).update(stamp=older)
    assert checkpoint_advice_stored(month=MONTH, teams=teams, include_unowned=True) is None
    CheckpointAdviceMonth.objects.filter(pk=header.pk).update(stamp="")
    assert checkpoint_advice_stored(month=MONTH, teams=teams, include_unowned=True) is None
    economics_refresh(month=MONTH)
    assert checkpoint_advice_stored(month=MONTH, teams=teams, include_unowned=True) == (
        checkpoint_advice(month=MONTH, teams=teams, include_unowned=True)
    )


def test_a_partial_refresh_replaces_only_its_teams_rows(scene: None, other_team: Team) -> None:
    """An import of run metrics refreshes the runs it names: their teams' advice is recomputed
    (speech), the other teams' rows stay as they were (vision: the same row ids)."""
    kept = set(CheckpointAdviceRow.objects.exclude(team=other_team).values_list("pk", flat=True))
    speech_run = RunCost.objects.filter(team=other_team, billing_period=MONTH).first()
    assert speech_run is not None
    economics_refresh(month=MONTH, run_ids=[speech_run.run_id])
    assert (
        set(CheckpointAdviceRow.objects.exclude(team=other_team).values_list("pk", flat=True))
        == kept
    )
    teams = Team.objects.all()
    assert checkpoint_advice_stored(month=MONTH, teams=teams, include_unowned=True) == (
        checkpoint_advice(month=MONTH, teams=teams, include_unowned=True)
    )


def test_a_deleted_month_drops_its_advice(scene: None) -> None:
    economics_delete_month(month=MONTH)
    assert not CheckpointAdviceMonth.objects.exists()
    assert not CheckpointAdviceRow.objects.exists()
    assert (
        checkpoint_advice_stored(month=MONTH, teams=Team.objects.all(), include_unowned=True)
        is None
    )


def test_the_api_reads_the_stored_rows(scene: None, lead_user: User) -> None:
    """A stored figure changed by hand shows on the API: it is read, not recomputed; a lead
    sees only their team's rows."""
    CheckpointAdviceRow.objects.filter(team__slug="vision").update(monthly_saving="123.45")
    api = APIClient()
    api.force_authenticate(lead_user)
    rows = api.get("/api/v1/waste/advice/", {"month": "2025-06"}).json()
    assert [(r["team"], Decimal(r["monthly_saving"])) for r in rows] == [
        ("vision", Decimal("123.45"))
    ]


def test_the_stored_advice_is_three_queries(
    scene: None, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    teams = Team.objects.all()
    with django_assert_num_queries(STORED_CHECKPOINT_ADVICE_QUERIES):
        rows = checkpoint_advice_stored(month=MONTH, teams=teams, include_unowned=True)
    assert rows
