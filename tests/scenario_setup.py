"""Loading a hand-made scenario of fixtures/scenarios/ (its setup.json): the Django fixtures and
objects it names, and its commands with the scenario's files made absolute. Shared by the
scenario suite (tests/attribution/test_fixture_scenarios.py) and the tests that start from one
scenario."""

from __future__ import annotations

import json
from collections.abc import Iterable
from io import StringIO
from pathlib import Path
from typing import Any

from django.core.management import call_command

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCENARIOS = FIXTURES / "scenarios"
DJANGO_FIXTURES = FIXTURES / "django"


def load_setup(setup: dict[str, Any], tmp_path: Path) -> None:
    """The Django fixtures named, then the scenario's own objects, both through loaddata (which
    resolves natural keys such as a team's slug and resets PostgreSQL sequences)."""
    paths = [DJANGO_FIXTURES / f"{name}.json" for name in setup.get("fixtures", [])]
    if setup.get("objects"):
        paths.append(tmp_path / "scenario-objects.json")
        paths[-1].write_text(json.dumps(setup["objects"]))
    for path in paths:
        call_command("loaddata", str(path), verbosity=0)


def run_command(folder: Path, command: list[str]) -> str:
    """A command of setup.json, its arguments naming files of the scenario made absolute."""
    name, *args = command
    args = [str(folder / a) if (folder / a).exists() else a for a in args]
    out = StringIO()
    call_command(name, *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def scenario_load(folder: Path, tmp_path: Path, *, months: Iterable[str] = ()) -> None:
    """A scenario folder's setup.json (its fixtures, objects and commands), then `attribute
    --month` of each of `months` ("2025-06")."""
    setup = json.loads((folder / "setup.json").read_text())
    load_setup(setup, tmp_path)
    for command in setup["commands"]:
        run_command(folder, command)
    for month in months:
        run_command(folder, ["attribute", "--month", month])


def run_metrics_month_attributed() -> None:
    """The bill and jobs of fixtures/scenarios/focus-slurm-run-metrics (team vision mapped to
    Slurm account cv), attributed; its run metrics are the caller's to import, in any format."""
    folder = SCENARIOS / "focus-slurm-run-metrics"
    call_command("loaddata", str(DJANGO_FIXTURES / "teams.json"), verbosity=0)
    from finops.org.models import Team

    Team.objects.get(slug="vision").mapping_rules.create(
        kind="slurm_account", value="cv", priority=50
    )
    run_command(folder, ["ingest_billing", "--format", "focus", "focus-2025-06.csv",
                         "--no-attribute"])  # fmt: skip
    run_command(folder, ["ingest_jobs", "--format", "slurm", "sacct-D-hpc.txt", "--cluster",
                         "hpc", "--no-attribute"])  # fmt: skip
    run_command(folder, ["attribute", "--month", "2025-06"])


def run_metrics_scenario_efficiency(api: Any) -> dict[str, Any]:
    """Run pretrain's efficiency as the API gives it (GET /api/v1/runs/{id}/) once the month is
    attributed (run_metrics_month_attributed); its metrics are the caller's to import first."""
    run_metrics_month_attributed()
    from finops.attribution.models import RunCost

    run = RunCost.objects.get(run_id="pretrain")
    efficiency: dict[str, Any] = api.get(f"/api/v1/runs/{run.pk}/").json()["efficiency"]
    return efficiency


def metric_row_facts(rows: list[Any]) -> list[tuple[object, ...]]:
    """What two formats of one run must agree on, row by row (run_metrics MetricRow)."""
    return [
        (r.run_id, r.team, r.timestamp, r.step, r.tokens, r.samples, r.checkpoint) for r in rows
    ]


def economics_against_read_time() -> list[Any]:
    """Every stored RunEconomics row (finops.economics) checked against the read-time selectors
    on the same data: the waste by cause of the row's attempts in its month
    (finops.waste.selectors.run_wastes), the run's energy in the month
    (finops.energy.selectors.energies) and its whole-run efficiency
    (finops.run_metrics.selectors.run_efficiency). Raises AssertionError on a difference;
    returns the rows (a caller asserts its scenario's own figures on them)."""
    from django.db.models import Q

    from finops.economics.models import RunEconomics
    from finops.economics.selectors import row_efficiency, row_waste
    from finops.energy.selectors import energies
    from finops.run_metrics.selectors import RunKey, run_efficiency
    from finops.waste.causes import CAUSES, WasteParts
    from finops.waste.selectors import run_wastes

    rows = list(RunEconomics.objects.select_related("team").order_by("billing_period", "run_id"))
    for row in rows:
        slug = row.team.slug if row.team else ""
        key = RunKey(row.team_id, slug, row.run_id, row.currency)
        parts = WasteParts()
        for attempt in run_wastes([key], month=row.billing_period)[key].attempts:
            if attempt.attempt.cluster == row.cluster:
                parts.add(attempt.parts)
        stored = row_waste(row)
        for cause in CAUSES:
            assert getattr(stored, cause) == getattr(parts, cause), (row, cause)
        assert stored.estimated_causes == parts.estimated_causes, row
        assert stored.total == parts.total, row
        assert row_efficiency(row) == run_efficiency(key), row
        team = Q(team__isnull=True) if row.team_id is None else Q(team_id=row.team_id)
        found = energies(months=[row.billing_period], runs=team & Q(run_id=row.run_id))
        energy = found.get((row.team_id, row.run_id))
        if energy is None:
            assert row.gpu_kwh is None, row
            continue
        assert (row.gpu_kwh, row.measured_kwh, row.estimated_kwh, row.facility_kwh,
                row.co2e_kg, row.energy_estimated) == (
            energy.gpu_kwh, energy.measured_kwh, energy.estimated_kwh, energy.facility_kwh,
            energy.co2e_kg, energy.estimated), row  # fmt: skip
        assert (row.co2e_missing_kwh, row.pue, row.pue_source, row.grid_g_per_kwh,
                row.grid_source, row.grid_year, row.power_source) == (
            energy.co2e_missing_kwh, energy.pue, energy.pue_source, energy.grid_g_per_kwh,
            energy.grid_source, energy.grid_year, energy.power_source), row  # fmt: skip
    return rows


def waste_month_attributed(tmp_path: Path) -> None:
    """fixtures/scenarios/focus-slurm-waste loaded through its setup.json and attributed
    (2025-06): the hand-worked waste by cause."""
    scenario_load(SCENARIOS / "focus-slurm-waste", tmp_path, months=["2025-06"])
