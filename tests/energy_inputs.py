"""The hand-worked energy scenario (fixtures/scenarios/focus-slurm-energy) loaded through the
real commands, for the energy tests (tests/test_energy.py, tests/test_energy_pages.py)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from django.core.management import call_command

from finops.org.models import Team

ENERGY = Path(__file__).resolve().parent.parent / "fixtures" / "scenarios" / "focus-slurm-energy"
QUIET = {"stdout": StringIO(), "stderr": StringIO()}


def energy_month() -> str:
    """The scenario's bill, jobs and energy, attributed; the energy command's output."""
    call_command("loaddata", str(ENERGY.parent.parent / "django" / "teams.json"), verbosity=0)
    Team.objects.get(slug="vision").mapping_rules.create(
        kind="slurm_account", value="cv", priority=50
    )
    call_command(
        "ingest_billing", "--format", "focus", str(ENERGY / "focus-2025-06.csv"),
        "--no-attribute", **QUIET,
    )  # fmt: skip
    call_command(
        "ingest_jobs", "--format", "slurm", str(ENERGY / "sacct-D-hpc.txt"), "--cluster", "hpc",
        "--no-attribute", **QUIET,
    )  # fmt: skip
    out = StringIO()
    call_command(
        "ingest_energy", "--format", "prometheus", str(ENERGY / "dcgm-energy-hpc.json"),
        "--cluster", "hpc", stdout=out,
    )  # fmt: skip
    call_command("attribute", "--month", "2025-06", **QUIET)
    return out.getvalue()


def scenario_load(name: str, month: str, scratch: Path) -> None:
    """A scenario folder's setup.json (Django fixtures, objects, commands), then attribution."""
    import json

    folder = ENERGY.parent / name
    setup = json.loads((folder / "setup.json").read_text())
    for fixture in setup.get("fixtures", []):
        call_command("loaddata", str(ENERGY.parent.parent / "django" / f"{fixture}.json"),
                     verbosity=0)  # fmt: skip
    if setup.get("objects"):
        objects = scratch / f"{name}-objects.json"
        objects.write_text(json.dumps(setup["objects"]))
        call_command("loaddata", str(objects), verbosity=0)
    for command, *args in setup["commands"]:
        paths = [str(folder / a) if (folder / a).is_file() else a for a in args]
        call_command(command, *paths, stdout=StringIO(), stderr=StringIO())
    call_command("attribute", "--month", month, stdout=StringIO(), stderr=StringIO())
