"""Commitment advice never above the pool (issue 27): the hand-made month of
fixtures/recommendations/coreweave-oversubscribed (its README.md holds the arithmetic), where the
jobs ask for 32 GPUs of a 16-GPU CoreWeave pool every hour (a job whose end was never reported
overlaps the ones that followed it)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from finops.org.models import Team
from finops.pricing.recommendations import recommendations_compute
from tests.scenario_setup import FIXTURES, load_setup, run_command

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]
FOLDER = FIXTURES / "recommendations" / "coreweave-oversubscribed"


def _month(tmp_path: Path) -> dict[str, Any]:
    setup = json.loads((FOLDER / "setup.json").read_text())
    load_setup(setup, tmp_path)
    for command in setup["commands"]:
        run_command(FOLDER, command)
    expected: dict[str, Any] = json.loads((FOLDER / "expected.json").read_text())
    return expected


def test_commitments_count_the_gpus_the_nodes_held_and_say_when_jobs_asked_for_more(
    tmp_path: Path,
) -> None:
    expected = _month(tmp_path)
    year, month = (int(p) for p in expected["month"].split("-"))
    drafts = recommendations_compute(month=dt.date(year, month, 1))
    slugs = dict(Team.objects.values_list("pk", "slug"))
    found = {(slugs.get(d.team_id), d.kind, d.key): d for d in drafts}
    assert set(found) == {(e["team"], e["kind"], e["key"]) for e in expected["recommendations"]}
    for want in expected["recommendations"]:
        draft = found[(want["team"], want["kind"], want["key"])]
        assert draft.monthly_savings == Decimal(want["monthly_savings"])
        assert draft.action == want["action"]
        assert {k: draft.assumptions[k] for k in want["assumptions"]} == want["assumptions"]
        assert {k: draft.evidence[k] for k in want["evidence"]} == want["evidence"]
    # Together the teams never commit more than the pool holds.
    committed = sum(Decimal(d.evidence["gpus"]) for d in drafts if d.kind == "commit")
    assert committed <= 16


def test_a_job_with_no_end_is_not_a_short_spot_candidate(tmp_path: Path) -> None:
    """The stale job (RUNNING, End Unknown) lasts to the month's end, not zero hours."""
    from finops.pricing.recommendation_inputs import nodes_of, on_demand_runs, window_of

    _month(tmp_path)
    month = dt.date(2025, 6, 1)
    runs = {r.run_id: r for r in on_demand_runs(month, nodes_of(window_of(month)))}
    assert runs["stale"].longest_hours == 720.0
    assert all(d.kind != "spot" for d in recommendations_compute(month=month))
