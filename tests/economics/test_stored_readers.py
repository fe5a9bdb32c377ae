"""The page and statement readers backed by the stored rollup (finops.economics) give the same
objects and figures as their read-time references, on the hand-worked scenarios
fixtures/scenarios/focus-slurm-waste, focus-slurm-energy and focus-slurm-run-metrics."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from finops.chargeback.economics import teams_month_economics, teams_month_economics_read_time
from finops.economics.models import TeamEnergyMonth, TeamWasteMonth
from finops.energy.selectors import team_month_energy
from finops.org.models import Team
from finops.web.energy_context import energy_card, energy_card_read_time, team_energy
from finops.web.waste_views import waste_card, waste_card_read_time
from tests.energy_inputs import energy_month
from tests.scenario_setup import run_metrics_month_attributed, waste_month_attributed

MONTH = date(2025, 6, 1)
SCENARIOS = ["waste", "energy", "run-metrics"]

pytestmark = pytest.mark.django_db


def _scenario(name: str, tmp_path: Path) -> None:
    if name == "waste":
        waste_month_attributed(tmp_path)
    elif name == "energy":
        energy_month()
    else:
        run_metrics_month_attributed()


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_waste_card_from_the_rollup_is_the_read_time_card(name: str, tmp_path: Path) -> None:
    _scenario(name, tmp_path)
    for teams, unowned in [
        (Team.objects.all(), True),
        (Team.objects.all(), False),
        (Team.objects.filter(slug="vision"), False),
    ]:
        stored = waste_card(month=MONTH, teams=teams, include_unowned=unowned)
        reference = waste_card_read_time(month=MONTH, teams=teams, include_unowned=unowned)
        assert stored == reference
        assert stored, "the scenario's month has runs"
    if name == "waste":
        card = waste_card(month=MONTH, teams=Team.objects.all(), include_unowned=True)
        assert sum(row.parts.total for row in card) > 0


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_statement_economics_from_the_rollup_are_the_read_time_ones(
    name: str, tmp_path: Path
) -> None:
    _scenario(name, tmp_path)
    ids = list(Team.objects.values_list("pk", flat=True))
    stored = teams_month_economics(month=MONTH, team_ids=ids)
    assert stored == teams_month_economics_read_time(month=MONTH, team_ids=ids)
    assert stored, "the scenario's month has runs"
    if name == "waste":
        assert sum(c.waste_total for e in stored.values() for c in e.currencies) > 0


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_energy_card_from_the_rollup_is_the_read_time_card(name: str, tmp_path: Path) -> None:
    _scenario(name, tmp_path)
    for teams, unowned in [
        (Team.objects.all(), True),
        (Team.objects.all(), False),
        (Team.objects.filter(slug="vision"), False),
    ]:
        stored = energy_card(month=MONTH, teams=teams, include_unowned=unowned)
        assert stored == energy_card_read_time(month=MONTH, teams=teams, include_unowned=unowned)
    card = energy_card(month=MONTH, teams=Team.objects.all(), include_unowned=True)
    assert card is not None
    assert card.gpu_kwh > 0
    if name == "energy":
        assert card.measured_kwh > 0
        assert card.co2e_kg is not None


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_team_energy_from_the_rollup_is_the_read_time_one(name: str, tmp_path: Path) -> None:
    """The team page's energy (stored rollup + the measured GPU-hours read apart) is the
    read-time TeamEnergy, every Decimal equal (sums of divisions: the same ones, same order)."""
    _scenario(name, tmp_path)
    for team in Team.objects.all():
        reference = team_month_energy(month=MONTH, team_ids=[team.pk])
        assert team_energy(team=team, month=MONTH) == (reference[0] if reference else None)
    vision = team_energy(team=Team.objects.get(slug="vision"), month=MONTH)
    assert vision is not None
    assert vision.gpu_kwh > 0
    if name == "energy":
        assert vision.measured_kwh > 0
        assert vision.measured_gpu_hours > 0


def test_the_statement_economics_of_a_month_without_per_team_sums(tmp_path: Path) -> None:
    """A month rolled up before the per-team sums were stored (TeamWasteMonth, TeamEnergyMonth
    missing): the statement reads the run rows instead, the same figures (h-pages: the
    statement reads the per-team sums first)."""
    waste_month_attributed(tmp_path)
    ids = list(Team.objects.values_list("pk", flat=True))
    summed = teams_month_economics(month=MONTH, team_ids=ids)
    assert TeamWasteMonth.objects.filter(billing_period=MONTH).exists()
    assert TeamEnergyMonth.objects.filter(billing_period=MONTH).exists()
    TeamWasteMonth.objects.all().delete()
    TeamEnergyMonth.objects.all().delete()
    from_runs = teams_month_economics(month=MONTH, team_ids=ids)
    assert from_runs == summed == teams_month_economics_read_time(month=MONTH, team_ids=ids)
