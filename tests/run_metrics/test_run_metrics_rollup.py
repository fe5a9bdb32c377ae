"""The stored rollup (finops.economics) keeps the efficiency the read-time selectors give, on the
hand-worked run-metrics scenario (fixtures/scenarios/focus-slurm-run-metrics, README.md there):
metrics imported after the month was attributed refresh its rows, and the team trend read from
the rollup equals the one computed at read time."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from finops.economics.models import RunEconomics
from finops.economics.selectors import row_efficiency, team_efficiency_stored
from finops.economics.services import EFFICIENCY_FIELDS, economics_refresh
from finops.org.models import Team
from finops.run_metrics.selectors import RunEfficiency
from finops.run_metrics.team_efficiency import TeamMonthEfficiency, team_efficiency_by_month
from tests.scenario_setup import (
    SCENARIOS,
    economics_against_read_time,
    run_metrics_month_attributed,
)

FOLDER = SCENARIOS / "focus-slurm-run-metrics"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())["months"]["2025-06"]
MONTH = dt.date(2025, 6, 1)

pytestmark = pytest.mark.django_db


def _import_metrics() -> None:
    call_command("ingest_run_metrics", "--format", "csv", str(FOLDER / "run-metrics-pretrain.csv"),
                 stdout=StringIO(), stderr=StringIO())  # fmt: skip


def test_metrics_imported_after_attribution_refresh_the_stored_efficiency() -> None:
    run_metrics_month_attributed()
    assert RunEconomics.objects.get(run_id="pretrain").has_metrics is False
    _import_metrics()
    rows = {r.run_id: r for r in economics_against_read_time()}
    expected = EXPECTED["run_efficiency"]["pretrain"]
    stored = row_efficiency(rows["pretrain"])
    assert stored is not None
    assert stored.cost_per_million_tokens == Decimal(expected["cost_per_million_tokens"])
    assert stored.mfu == Decimal(expected["mfu"])
    assert stored.useful_tokens == expected["useful_tokens"]
    assert stored.gpu_hours == Decimal(expected["gpu_hours"])
    assert row_efficiency(rows["eval"]) is None


def test_refreshing_a_month_refreshes_the_runs_rows_of_their_other_months() -> None:
    run_metrics_month_attributed()
    _import_metrics()
    june = {r.run_id: r for r in RunEconomics.objects.filter(billing_period=MONTH)}
    may = dt.date(2025, 5, 1)
    # The runs' rows of May (a run spans months): pretrain's stored before its metrics came
    # (stale), eval's as June's (it has no metrics: nothing to write).
    for run_id, stale in (("pretrain", True), ("eval", False)):
        row = june[run_id]
        row.pk, row.billing_period = None, may
        if stale:
            row.has_metrics, row.useful_tokens, row.mfu = False, None, None
            row.cost_per_million_tokens = None
        row.save()
    summary = economics_refresh(month=MONTH)
    assert summary["other_month_rows"] == 1
    for run_id in ("pretrain", "eval"):
        rows = RunEconomics.objects.filter(run_id=run_id).order_by("billing_period")
        may_row, june_row = rows.values_list(*EFFICIENCY_FIELDS)
        assert may_row == june_row
    refreshed = RunEconomics.objects.get(run_id="pretrain", billing_period=may)
    assert refreshed.mfu == Decimal(EXPECTED["run_efficiency"]["pretrain"]["mfu"])


def test_the_team_trend_from_the_rollup_equals_the_read_time_trend() -> None:
    run_metrics_month_attributed()
    _import_metrics()
    vision = Team.objects.get(slug="vision")
    months = [dt.date(2025, 5, 1), MONTH]
    stored = team_efficiency_stored(team=vision, months=months)
    assert stored == team_efficiency_by_month(team=vision, months=months)
    [june] = stored
    assert june.runs_with_metrics == 1
    assert june.best is not None
    assert june.best.run_id == "pretrain"


def test_the_team_page_shows_the_trend_from_the_rollup(finance_client: Client) -> None:
    run_metrics_month_attributed()
    _import_metrics()
    response = finance_client.get(reverse("web:team", args=["vision"]), {"month": "2025-06"})
    assert response.status_code == 200
    text = re.sub(r"\s+", " ", response.content.decode())
    table = re.search(r'data-testid="team-efficiency-USD">(.*?)</table>', text)
    assert table is not None
    # June: 160 USD for 524,288,000 useful tokens = 0.31 USD per 1M (0.30517...), MFU 38.7 %,
    # the only measured run best (no worst: one run).
    body = table.group(1).split("</thead>")[1]
    assert "0.31" in body
    assert "38.7 %" in body
    assert ">pretrain</a>" in body


def _efficiency(cost: str, tokens: int) -> RunEfficiency:
    return RunEfficiency(
        useful_tokens=tokens, samples=None, steps=1, currency="USD", cost=Decimal(cost),
        gpu_hours=Decimal(10), cost_per_million_tokens=Decimal(cost) * 10**6 / tokens,
        cost_per_thousand_samples=None, tokens_per_gpu_hour=None, mfu=Decimal("0.3"),
        flops_per_token=None, peak_flops_per_gpu=None, peak_source="", gpu_model="H100",
        dtype="bf16",
    )  # fmt: skip


def test_a_run_without_amortised_cost_is_not_the_best_run() -> None:
    """The six-month demo's GCP fine-tunes run on A3 nodes a committed use discount covers: the
    bill keeps the fee on its own lines (shared by GPU spend), so the runs' ledger cost is 0 and
    they read 0.00 per 1M tokens. They count in the month's sums, never as its best run."""
    row = TeamMonthEfficiency(month=MONTH, currency="USD")
    row.add("covered-by-cud", _efficiency("0", 10**9))
    row.add("cheap", _efficiency("100", 10**8))  # 1.00 per 1M
    row.add("dear", _efficiency("300", 10**8))  # 3.00 per 1M
    row.finish()
    assert row.runs_with_metrics == 3
    assert row.cost == 400
    assert row.best is not None
    assert row.best.run_id == "cheap"
    assert row.worst is not None
    assert row.worst.run_id == "dear"
