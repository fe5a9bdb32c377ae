"""The stored rollup (finops.economics) keeps the energy and carbon the read-time selectors
give, on the hand-worked scenario fixtures/scenarios/focus-slurm-energy (README.md there)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import call_command

from finops.economics.models import RunEconomics
from finops.org.models import Team
from tests.energy_inputs import ENERGY, QUIET, energy_month
from tests.scenario_setup import economics_against_read_time

EXPECTED = json.loads((ENERGY / "expected.json").read_text())["months"]["2025-06"]["run_energy"]

pytestmark = pytest.mark.django_db


def test_the_pipeline_stores_the_read_time_energy_of_every_run() -> None:
    energy_month()
    rows = {r.run_id: r for r in economics_against_read_time()}
    assert sorted(rows) == sorted(EXPECTED)
    for run_id, expected in EXPECTED.items():
        row = rows[run_id]
        assert row.gpu_kwh == Decimal(expected["gpu_kwh"]), run_id
        assert row.measured_kwh == Decimal(expected["measured_kwh"]), run_id
        assert row.facility_kwh == Decimal(expected["facility_kwh"]), run_id
        assert row.co2e_kg == Decimal(expected["co2e_kg"]), run_id
        assert row.energy_estimated is expected["estimated"], run_id


def test_an_energy_import_after_attribution_refreshes_the_month() -> None:
    """Energy imported once the month is attributed: the import asks for the month's rollup
    again (finops.core.pipeline_wake.economics_refresh_send; eager Celery runs it here)."""
    call_command("loaddata", str(ENERGY.parent.parent / "django" / "teams.json"), verbosity=0)
    Team.objects.get(slug="vision").mapping_rules.create(
        kind="slurm_account", value="cv", priority=50
    )
    call_command("ingest_billing", "--format", "focus", str(ENERGY / "focus-2025-06.csv"),
                 "--no-attribute", **QUIET)  # fmt: skip
    call_command("ingest_jobs", "--format", "slurm", str(ENERGY / "sacct-D-hpc.txt"),
                 "--cluster", "hpc", "--no-attribute", **QUIET)  # fmt: skip
    call_command("attribute", "--month", "2025-06", **QUIET)
    before = RunEconomics.objects.get(run_id="pretrain")
    assert (before.measured_kwh, before.energy_estimated) == (0, True)
    call_command("ingest_energy", "--format", "prometheus", str(ENERGY / "dcgm-energy-hpc.json"),
                 "--cluster", "hpc", **QUIET)  # fmt: skip
    row = RunEconomics.objects.get(run_id="pretrain")
    assert row.measured_kwh == Decimal(EXPECTED["pretrain"]["measured_kwh"])
    assert row.energy_estimated is False
    economics_against_read_time()
