"""The stored rollup (finops.economics) keeps the waste by cause the read-time selectors give,
on the hand-worked scenario fixtures/scenarios/focus-slurm-waste (README.md there): every row
equals the read-time figures, and the scenario's own parts are the stored ones. Through the
rollup, the parts of attributed random runs stay >= 0 and within each run's cost."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from finops.economics.models import RunEconomics
from finops.economics.selectors import row_waste
from finops.economics.services import economics_refresh
from finops.org.models import Team
from finops.waste.causes import CAUSES
from tests.scenario_setup import SCENARIOS, economics_against_read_time, load_setup, run_command

FOLDER = SCENARIOS / "focus-slurm-waste"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())["months"]["2025-06"]


@pytest.fixture
def scene(tmp_path: Path, team: Team, other_team: Team) -> None:
    setup = json.loads((FOLDER / "setup.json").read_text())
    load_setup({**setup, "fixtures": []}, tmp_path)
    for command in setup["commands"]:
        run_command(FOLDER, command)
    run_command(FOLDER, ["attribute", "--month", "2025-06"])


@pytest.mark.django_db
def test_the_pipeline_stores_the_read_time_waste_of_every_run(scene: None) -> None:
    rows = economics_against_read_time()
    assert sorted(r.run_id for r in rows) == sorted(EXPECTED["run_waste"])
    for row in rows:
        expected = EXPECTED["run_waste"][row.run_id]["waste"]
        parts = row_waste(row)
        for cause in CAUSES:
            assert getattr(parts, cause) == Decimal(expected[cause]), (row.run_id, cause)
        assert parts.total == Decimal(expected["total"])
        assert sorted(parts.estimated_causes) == sorted(expected.get("estimated_causes", []))


@pytest.mark.django_db
def test_a_refresh_replaces_the_months_rows(scene: None) -> None:
    before = {r.run_id: r.waste_total for r in RunEconomics.objects.all()}
    RunEconomics.objects.update(waste_total=Decimal(999))
    summary = economics_refresh(month=min(r.billing_period for r in RunEconomics.objects.all()))
    assert summary["runs"] == len(before)
    assert {r.run_id: r.waste_total for r in RunEconomics.objects.all()} == before
