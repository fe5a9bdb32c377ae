"""The pricing page's measured power read through the stored run economics (issue 27: the page
computed every run's energy of the month to find none measured). On the hand-worked scenario
fixtures/scenarios/focus-slurm-energy: vision's pretrain drew 2.6 GPU kWh in 16 GPU-hours
(measured), speech's eval has no measurement."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from finops.economics.models import RunEconomics
from finops.economics.selectors import teams_measured_power_stored
from finops.energy.selectors import teams_measured_power
from finops.org.models import Team
from tests.energy_inputs import energy_month

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 6, 1)


def test_only_teams_with_stored_measured_energy_are_read_again_and_the_figures_agree() -> None:
    energy_month()
    ids = list(Team.objects.values_list("pk", flat=True))
    vision = Team.objects.get(slug="vision").pk
    live = teams_measured_power(month=MONTH, team_ids=ids)
    stored = teams_measured_power_stored(month=MONTH, team_ids=ids)
    assert stored == live
    assert set(stored) == {vision}
    assert (stored[vision].kwh, stored[vision].gpu_hours) == (Decimal("2.6"), Decimal(16))
    # Without stored run economics, every team is read at read time: the same answer.
    RunEconomics.objects.filter(billing_period=MONTH).delete()
    assert teams_measured_power_stored(month=MONTH, team_ids=ids) == live
