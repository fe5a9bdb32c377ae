"""What a statement's runs bought is read from the stored run economics (issue 29:
finops.economics.selectors.teams_bought_stored), not computed from the run metrics per view;
the rollup is rebuilt when the month is attributed again.

Hand-worked (fixtures/scenarios/focus-slurm-waste/README.md): vision's pretrain run ended in
June with 268,435,456 useful tokens for 240 USD = 0.894069671631 USD per 1M tokens.
"""

from __future__ import annotations

import io
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from finops.chargeback.economics import team_month_economics, teams_month_economics_read_time
from finops.economics.models import RunEconomics, TeamEnergyRow, TeamWasteRow
from finops.org.models import Team
from tests.scenario_setup import waste_month_attributed

pytestmark = pytest.mark.django_db
JUNE = date(2025, 6, 1)


def _bought(team: Team) -> tuple[int, int, Decimal, Decimal | None]:
    [usd] = team_month_economics(team=team, month=JUNE).currencies
    return usd.runs_with_metrics, usd.useful_tokens, usd.measured_cost, usd.cost_per_million_tokens


def test_the_bought_figures_are_the_stored_ones_until_the_month_is_attributed_again(
    tmp_path: Path,
) -> None:
    waste_month_attributed(tmp_path)
    vision = Team.objects.get(slug="vision")
    assert _bought(vision) == (1, 268435456, Decimal(240), Decimal("0.894069671631"))
    assert (
        team_month_economics(team=vision, month=JUNE)
        == (teams_month_economics_read_time(month=JUNE, team_ids=[vision.pk])[vision.pk])
    )

    # A stored row changed by hand shows: the figures are the rollup's, not recomputed.
    RunEconomics.objects.filter(run_id="pretrain", billing_period=JUNE).update(
        useful_tokens=536870912, cost_per_million_tokens=Decimal("0.447034835815")
    )
    assert _bought(vision) == (1, 536870912, Decimal(240), Decimal("0.447034835815"))

    # Attributed again: the pipeline rebuilds the rollup, the read-time figures are back.
    call_command("attribute", "--month", "2025-06", stdout=io.StringIO())
    assert _bought(vision) == (1, 268435456, Decimal(240), Decimal("0.894069671631"))


def test_the_waste_and_energy_are_the_stored_per_team_sums(tmp_path: Path) -> None:
    """The statement's wasted and burned panels read the per-team sums the run-economics step
    stores (TeamWasteRow, TeamEnergyRow), as the overview does, not every run row of the
    team's month (h-pages): a stored sum changed by hand shows."""
    waste_month_attributed(tmp_path)
    vision = Team.objects.get(slug="vision")
    [usd] = team_month_economics(team=vision, month=JUNE).currencies
    assert usd.rework == 20
    energy = team_month_economics(team=vision, month=JUNE).energy
    assert energy is not None
    TeamWasteRow.objects.filter(team=vision, month__billing_period=JUNE).update(rework="21")
    TeamEnergyRow.objects.filter(team=vision, month__billing_period=JUNE).update(
        gpu_kwh=energy.gpu_kwh + 1
    )
    after = team_month_economics(team=vision, month=JUNE)
    assert after.currencies[0].rework == 21
    assert after.energy is not None
    assert after.energy.gpu_kwh == energy.gpu_kwh + 1
