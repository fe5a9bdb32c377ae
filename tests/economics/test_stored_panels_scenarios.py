"""The stored panels of issue 29 (the idle showback, written with the ledger; the checkpoint
advice, written by the run-economics step) against their read-time computations on every
hand-made scenario of fixtures/scenarios/: after each month's attribution through the pipeline,
for every team alone and all of them (with and without the unowned runs), the same objects
with the same places."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from finops.attribution.selectors.idle_showback import idle_showback, idle_showback_stored
from finops.core.months import month_parse
from finops.economics.advice_selectors import checkpoint_advice_stored
from finops.org.models import Team
from finops.waste.advice import checkpoint_advice
from tests.scenario_setup import SCENARIOS, scenario_load

pytestmark = pytest.mark.django_db
# Shared costs only (no jobs: no attempts, no idle); jobs of no team (no team to show idle to).
WITHOUT_JOBS = {"azure-focuscost-shared"}
WITHOUT_TEAM_JOBS = {"focus-slurm-parsable-noheader"}  # its jobs have no team (no Account)


def _names() -> list[str]:
    return sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())


def _text(rows: list[Any]) -> list[tuple[str, ...]]:
    return [tuple(str(getattr(r, f.name)) for f in fields(r)) for r in rows]


def _attributed(name: str, tmp_path: Path) -> list[date]:
    folder = SCENARIOS / name
    months = list(json.loads((folder / "expected.json").read_text())["months"])
    scenario_load(folder, tmp_path, months=months)
    return [month_parse(m) for m in months]


@pytest.mark.parametrize("name", _names())
def test_stored_panels_are_the_read_time_ones(name: str, tmp_path: Path) -> None:
    months = _attributed(name, tmp_path)
    scopes = [Team.objects.all(), *(Team.objects.filter(pk=t.pk) for t in Team.objects.all())]
    showback_rows = advice_rows = 0
    for month in months:
        for teams in scopes:
            shown = idle_showback_stored(month=month, teams=teams)
            assert shown is not None, (name, month)
            reference = idle_showback(month=month, teams=teams)
            assert shown == reference, (name, month)
            assert _text(shown) == _text(reference), (name, month)
            showback_rows += len(shown)
            for unowned in (True, False):
                advice = checkpoint_advice_stored(month=month, teams=teams, include_unowned=unowned)
                assert advice is not None, (name, month)
                expected = checkpoint_advice(month=month, teams=teams, include_unowned=unowned)
                assert advice == expected, (name, month, unowned)
                assert _text(advice) == _text(expected), (name, month, unowned)
                advice_rows += len(advice)
    # Not a comparison of empty lists: every scenario with jobs has rows of both panels.
    if name in WITHOUT_JOBS:
        assert (showback_rows, advice_rows) == (0, 0)
    else:
        assert advice_rows > 0, name
        assert showback_rows > 0 or name in WITHOUT_TEAM_JOBS, name
