"""manage.py refresh_run_economics rebuilds the stored rollup of every month (or one), with the
read-time figures, on the hand-worked scenario fixtures/scenarios/focus-slurm-energy."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from finops.economics.models import RunEconomics
from tests.energy_inputs import energy_month
from tests.scenario_setup import economics_against_read_time

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("args", [[], ["--month", "2025-06"]])
def test_the_command_rebuilds_the_rows(args: list[str]) -> None:
    energy_month()
    count = RunEconomics.objects.count()
    RunEconomics.objects.update(gpu_kwh=None, grid_year="", co2e_missing_kwh=None)
    out = StringIO()
    call_command("refresh_run_economics", *args, stdout=out)
    assert out.getvalue().startswith("2025-06: ")
    assert RunEconomics.objects.count() == count
    assert RunEconomics.objects.filter(gpu_kwh__isnull=False).exists()
    economics_against_read_time()
