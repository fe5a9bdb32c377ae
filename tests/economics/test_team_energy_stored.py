"""The stored per-team energy of a month (issue 29: the overview's energy card read every run row
of the month) against the read-time team_month_energy on every hand-made scenario of
fixtures/scenarios/: after each month's attribution through the pipeline, for every team alone
and all of them (with and without the unowned runs), the same objects with the same places,
the measured GPU-hours included (the PUE and grid intensity equal in value); and the energy
card from them is energy_card_read_time's."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from finops.core.months import month_parse
from finops.economics.energy_selectors import team_month_energy_summed
from finops.economics.models import TeamEnergyMonth, TeamEnergyRow
from finops.energy.selectors import team_month_energy
from finops.org.models import Team
from finops.web.energy_context import energy_card, energy_card_read_time
from tests.scenario_setup import SCENARIOS, scenario_load

pytestmark = pytest.mark.django_db


def _names() -> list[str]:
    return sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())


# Equal in value, not in places: the run rows the sums are made from keep the factors in
# 6-place columns (1.135000 for 1.135); the pages print them without trailing zeros.
FACTORS = {"pue", "grid_g_per_kwh"}


def _text(rows: list[Any]) -> list[tuple[str, ...]]:
    return [
        tuple(str(getattr(r, f.name)) for f in fields(r) if f.name not in FACTORS) for r in rows
    ]


def _attributed(folder: Path, tmp_path: Path) -> list[date]:
    months = list(json.loads((folder / "expected.json").read_text())["months"])
    scenario_load(folder, tmp_path, months=months)
    return [month_parse(m) for m in months]


def _diff(found: list[Any] | None, want: list[Any]) -> list[tuple[str, str, str]]:
    """The fields whose text differs (for the failure message)."""
    return [
        (f.name, str(getattr(a, f.name)), str(getattr(b, f.name)))
        for a, b in zip(found or [], want, strict=False)
        for f in fields(b)
        if f.name not in FACTORS and str(getattr(a, f.name)) != str(getattr(b, f.name))
    ]


@pytest.mark.parametrize("name", _names())
def test_stored_team_energy_is_the_read_time_one(name: str, tmp_path: Path) -> None:
    months = _attributed(SCENARIOS / name, tmp_path)
    owned: list[list[int | None]] = [[t.pk] for t in Team.objects.all()]
    every = [t.pk for t in Team.objects.all()]
    scopes: list[list[int | None]] = [*owned, [*every], [*every, None], [None]]
    for month in months:
        assert TeamEnergyMonth.objects.filter(billing_period=month).exists(), (name, month)
        for ids in scopes:
            stored = team_month_energy_summed(month=month, team_ids=ids)
            reference = team_month_energy(month=month, team_ids=ids)
            assert stored == reference, (name, month, ids)
            assert _text(stored) == _text(reference), (name, month, _diff(stored, reference))
        for unowned in (True, False):
            teams = Team.objects.all()
            card = energy_card(month=month, teams=teams, include_unowned=unowned)
            assert card == energy_card_read_time(month=month, teams=teams, include_unowned=unowned)
    stored_rows = TeamEnergyRow.objects.filter(month__billing_period__in=months).count()
    read_rows = sum(len(team_month_energy(month=m, team_ids=[*every, None])) for m in months)
    assert stored_rows == read_rows, name


# A scenario whose runs ran on nodes of the ledger (energy estimated from their GPUs' power).
ENERGY = "focus-slurm-waste"


def test_a_month_not_stored_or_stale_is_not_read_from_the_store(tmp_path: Path) -> None:
    [month] = _attributed(SCENARIOS / ENERGY, tmp_path)
    ids: list[int | None] = [*Team.objects.values_list("pk", flat=True), None]
    reference = team_month_energy(month=month, team_ids=ids)
    assert reference
    assert all(r.gpu_kwh > 0 for r in reference)
    # The pages read the stored sums: a row changed by hand shows.
    TeamEnergyRow.objects.filter(month__billing_period=month).update(gpu_kwh="999")
    stored = team_month_energy_summed(month=month, team_ids=ids)
    assert stored is not None
    assert {r.gpu_kwh for r in stored} == {Decimal(999)}
    # Energy imported after the month was stored (its refresh not run yet): read time.
    TeamEnergyMonth.objects.filter(billing_period=month).update(newest_job_energy=-1)
    assert team_month_energy_summed(month=month, team_ids=ids) == reference
    # Not stored (rolled up before the store existed): the caller reads the run rows.
    TeamEnergyMonth.objects.filter(billing_period=month).delete()
    assert team_month_energy_summed(month=month, team_ids=ids) is None
    card = energy_card(month=month, teams=Team.objects.all(), include_unowned=True)
    assert card is not None
    assert card.gpu_kwh == sum(r.gpu_kwh for r in reference)
