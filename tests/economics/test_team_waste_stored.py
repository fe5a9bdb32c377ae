"""The stored per-team waste of a month (issue 29: the overview's waste card summed every run
row of four months) against the sums of the run rows (team_months_waste_stored) and the
read-time team_months_waste, on every hand-made scenario of fixtures/scenarios/: after each
month's attribution through the pipeline, for every team alone and all of them (with and
without the unowned runs), the same objects with the same places."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from finops.core.months import month_parse
from finops.economics.models import TeamWasteMonth, TeamWasteRow
from finops.economics.selectors import team_months_waste_stored
from finops.economics.waste_selectors import team_months_waste_summed
from finops.org.models import Team
from finops.waste.selectors import team_months_waste
from finops.web.waste_views import waste_card, waste_card_read_time
from tests.scenario_setup import SCENARIOS, scenario_load

pytestmark = pytest.mark.django_db


def _names() -> list[str]:
    return sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())


def _attributed(folder: Path, tmp_path: Path) -> list[date]:
    months = list(json.loads((folder / "expected.json").read_text())["months"])
    scenario_load(folder, tmp_path, months=months)
    return [month_parse(m) for m in months]


def _text(by_month: dict[date, list[Any]]) -> dict[date, list[tuple[str, ...]]]:
    """Each row's figures as text (the places too), its parts' figures included."""
    return {
        month: [
            (str(r.team.pk if r.team else None), r.currency, str(r.cost), str(r.runs),
             *(str(getattr(r.parts, f.name)) for f in fields(r.parts)))
            for r in rows
        ]
        for month, rows in by_month.items()
    }  # fmt: skip


@pytest.mark.parametrize("name", _names())
def test_stored_team_waste_is_the_run_rows_and_the_read_time_one(name: str, tmp_path: Path) -> None:
    months = _attributed(SCENARIOS / name, tmp_path)
    every = Team.objects.all()
    scopes = [*(Team.objects.filter(pk=t.pk) for t in every), every]
    for month in months:
        assert TeamWasteMonth.objects.filter(billing_period=month).exists(), (name, month)
    for teams in scopes:
        for unowned in (True, False):
            scope = (name, list(teams), unowned)
            stored = team_months_waste_summed(months=months, teams=teams, include_unowned=unowned)
            run_rows = team_months_waste_stored(months=months, teams=teams, include_unowned=unowned)
            assert _text(stored) == _text(run_rows), scope
            assert stored == team_months_waste(
                months=months, teams=teams, include_unowned=unowned
            ), scope
    for month in months:
        for unowned in (True, False):
            card = waste_card(month=month, teams=every, include_unowned=unowned)
            assert card == waste_card_read_time(month=month, teams=every, include_unowned=unowned)
    stored_rows = TeamWasteRow.objects.filter(month__billing_period__in=months).count()
    read = team_months_waste(months=months, teams=every, include_unowned=True)
    assert stored_rows == sum(len(rows) for rows in read.values()), name


def test_a_month_not_stored_is_summed_from_its_run_rows(tmp_path: Path) -> None:
    [month] = _attributed(SCENARIOS / "focus-slurm-waste", tmp_path)
    every = Team.objects.all()
    reference = team_months_waste(months=[month], teams=every, include_unowned=True)
    assert any(r.parts.total > 0 for r in reference[month])  # the scenario wastes money
    # The card reads the stored sums: a row changed by hand shows.
    TeamWasteRow.objects.filter(month__billing_period=month).update(rework="999")
    stored = team_months_waste_summed(months=[month], teams=every, include_unowned=True)
    assert {r.parts.rework for r in stored[month]} == {Decimal(999)}
    # Not stored (rolled up before the store existed): the run rows.
    TeamWasteMonth.objects.filter(billing_period=month).delete()
    assert team_months_waste_summed(months=[month], teams=every, include_unowned=True) == reference
