"""economics_refresh reads and writes a month in chunks of runs (services.CHUNK_ROWS, memory
bounded by a chunk: a 1,000-node month held at once took 1.29 GB): on every hand-made scenario
of fixtures/scenarios/, a refresh in chunks of one rollup row (as many chunks as runs) stores
exactly the rows of a refresh in one chunk (RunEconomics in the same order, the checkpoint advice,
the team energy and waste), and a chunk never cuts a (team, run)."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import models

from finops.core.months import month_parse
from finops.economics import services
from finops.economics.models import (
    CheckpointAdviceMonth,
    CheckpointAdviceRow,
    RunEconomics,
    TeamEnergyMonth,
    TeamEnergyRow,
    TeamWasteMonth,
    TeamWasteRow,
)
from tests.scenario_setup import SCENARIOS, scenario_load

pytestmark = pytest.mark.django_db

# What a refresh sets anew each time, or the header a row hangs from (a new one each refresh).
NOT_COMPARED = {"id", "refreshed_at", "month"}
STORED: list[type[models.Model]] = [
    RunEconomics, CheckpointAdviceMonth, CheckpointAdviceRow, TeamEnergyMonth, TeamEnergyRow,
    TeamWasteMonth, TeamWasteRow,
]  # fmt: skip


def _names() -> list[str]:
    return sorted(p.name for p in SCENARIOS.iterdir() if (p / "expected.json").is_file())


def _stored() -> dict[str, list[tuple[str, ...]]]:
    """Every stored row (RunEconomics in id order, the order the refresh wrote them), each
    value as text (a Decimal's places included)."""
    found = {}
    for model in STORED:
        names = [f.attname for f in model._meta.concrete_fields if f.name not in NOT_COMPARED]
        rows = [
            tuple(map(str, r)) for r in model._default_manager.order_by("pk").values_list(*names)
        ]
        found[model.__name__] = rows if model is RunEconomics else sorted(rows)
    return found


@pytest.mark.parametrize("name", _names())
def test_a_refresh_in_chunks_stores_the_rows_of_one_chunk(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = SCENARIOS / name
    named = list(json.loads((folder / "expected.json").read_text())["months"])
    scenario_load(folder, tmp_path, months=named)
    months = [month_parse(m) for m in named]
    chunks: list[int] = []
    original = services._refresh_chunk

    def counted(month: date, rollups: list[services._Rollup], *rest: object) -> object:
        chunks.append(len(rollups))
        return original(month, rollups, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(services, "_refresh_chunk", counted)
    monkeypatch.setattr(services, "CHUNK_ROWS", 10**9)
    for month in months:
        services.economics_refresh(month=month)
    whole = _stored()
    assert len(chunks) == len([m for m in months if RunEconomics.objects.filter(billing_period=m)])
    chunks.clear()
    monkeypatch.setattr(services, "CHUNK_ROWS", 1)
    for month in months:
        services.economics_refresh(month=month)
    runs = {
        (m, t, r)
        for m, t, r in RunEconomics.objects.values_list("billing_period", "team_id", "run_id")
    }
    assert len(chunks) == len(runs), name  # one chunk per (team, run) of each month
    assert _stored() == whole, name


def _rollup(team_id: int | None, run_id: str, cluster: str, currency: str) -> services._Rollup:
    return services._Rollup(team_id, "t", run_id, cluster, currency, "training", Decimal(1))


def test_a_chunk_never_cuts_a_team_run() -> None:
    rollups = [
        _rollup(1, "a", "hpc", "EUR"), _rollup(1, "a", "hpc", "USD"), _rollup(1, "a", "k8s", "USD"),
        _rollup(1, "b", "hpc", "USD"), _rollup(2, "a", "hpc", "USD"), _rollup(2, "a", "k8s", "USD"),
        _rollup(None, "a", "hpc", "USD"),
    ]  # fmt: skip
    assert [len(c) for c in services._chunks(rollups, 1)] == [3, 1, 2, 1]
    assert [len(c) for c in services._chunks(rollups, 4)] == [4, 3]
    assert [len(c) for c in services._chunks(rollups, 100)] == [7]
    assert services._chunks([], 5) == []
