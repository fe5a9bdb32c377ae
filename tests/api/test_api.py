"""REST API v1: shapes, decimal strings at full precision, reconciliation numbers, query counts."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from pytest_django import DjangoAssertNumQueries
from rest_framework.test import APIClient

from billing_ingest.models import CostLineItem
from finops.attribution.models import AllocatedCost, Category
from finops.org.models import Team
from tests.client_types import Response
from tests.factories import (
    ImportBatchFactory,
    RunCostFactory,
    Scenario,
    TeamFactory,
)

CATEGORIES = [c.value for c in Category]


def _results(response: Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) >= {"count", "results"}  # limit/offset pagination
    return body["results"]


def test_teams_lists_all_for_finance_and_own_for_lead(
    finance_api: APIClient, lead_api: APIClient, team: Team, other_team: Team
) -> None:
    assert _results(finance_api.get("/api/v1/teams/")) == [
        {"slug": other_team.slug, "name": other_team.name},
        {"slug": team.slug, "name": team.name},
    ]
    assert _results(lead_api.get("/api/v1/teams/")) == [{"slug": team.slug, "name": team.name}]


def test_runs_shape_and_decimal_strings(finance_api: APIClient, scenario: Scenario) -> None:
    rows = _results(finance_api.get("/api/v1/runs/", {"month": "2025-09"}))
    by_id = {r["run_id"]: r for r in rows}
    assert set(by_id) == {"llama/7b v2", "asr-1"}
    run = by_id["llama/7b v2"]
    assert run is not None
    expected_keys = {
        "run_id",
        "team",
        "cost",
        "gpu_hours",
        "cost_per_gpu_hour",
        "wasted_cost",
        "jobs",
        "failed_jobs",
        "cluster",
        "currency",
        "month",
    }
    assert expected_keys <= set(run)
    assert run["team"] == scenario.team.slug
    assert run["month"] == "2025-09"
    assert run["currency"] == "USD"
    assert run["cluster"] == "hpc1"
    assert (run["jobs"], run["failed_jobs"]) == (2, 1)
    for key in ("cost", "gpu_hours", "cost_per_gpu_hour", "wasted_cost"):
        assert isinstance(run[key], str), key
    # Full precision: every stored money place is kept, not rounded to cents.
    assert run["cost"] == "500.250000000000"
    assert Decimal(run["cost"]) == scenario.run.cost
    assert Decimal(run["wasted_cost"]) == scenario.run.wasted_cost
    hours = scenario.run.gpu_seconds / 3600
    assert Decimal(run["gpu_hours"]) == hours
    assert Decimal(run["cost_per_gpu_hour"]) == (scenario.run.cost / hours).quantize(
        Decimal("1e-12")
    )


def test_runs_keep_sub_cent_precision(finance_api: APIClient, team: Team) -> None:
    RunCostFactory.create(team=team, run_id="tiny", cost=Decimal("0.000000000123"))
    (row,) = _results(finance_api.get("/api/v1/runs/", {"month": "2025-09"}))
    assert row["cost"] == "0.000000000123"


def test_runs_filter_by_team_and_month(
    finance_api: APIClient, scenario: Scenario, other_team: Team
) -> None:
    rows = _results(finance_api.get("/api/v1/runs/", {"month": "2025-09", "team": "speech"}))
    assert [r["run_id"] for r in rows] == ["asr-1"]
    assert _results(finance_api.get("/api/v1/runs/", {"month": "2025-08"})) == []


def test_runs_bad_month_is_400(finance_api: APIClient, scenario: Scenario) -> None:
    response = finance_api.get("/api/v1/runs/", {"month": "2025-13"})
    assert response.status_code == 400
    assert "month" in response.json()


def test_runs_lead_sees_only_own_team(lead_api: APIClient, scenario: Scenario) -> None:
    rows = _results(lead_api.get("/api/v1/runs/", {"month": "2025-09"}))
    assert {r["team"] for r in rows} == {scenario.team.slug}
    # Asking for another team's runs gives nothing, not an error that confirms it exists.
    assert _results(lead_api.get("/api/v1/runs/", {"team": "speech"})) == []


def test_runs_list_query_count_is_flat(
    finance_api: APIClient,
    scenario: Scenario,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    for i in range(30):
        RunCostFactory.create(team=TeamFactory.create(slug=f"t{i}"), run_id=f"r{i}")
    with django_assert_max_num_queries(4):
        rows = _results(finance_api.get("/api/v1/runs/"))
    assert len(rows) == 32


Account = tuple[str, str, str]  # provider, billing account, currency


def _expected_reconciliation(
    month: dt.date,
) -> tuple[dict[Account, list[Decimal]], dict[Account, dict[str, Decimal]]]:
    """Recompute the bill and the ledger per account from the rows in the database."""
    billed: dict[Account, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for li in CostLineItem.objects.filter(billing_period=month):
        key = (li.provider_name, li.billing_account_id, li.billing_currency)
        billed[key][0] += li.effective_cost
        billed[key][1] += li.billed_cost
    attributed: dict[Account, dict[str, Decimal]] = defaultdict(
        lambda: dict.fromkeys(CATEGORIES, Decimal(0))
    )
    for a in AllocatedCost.objects.filter(billing_period=month):
        attributed[(a.provider_name, a.billing_account_id, a.billing_currency)][a.category] += (
            a.amount
        )
    return billed, attributed


def test_reconciliation_numbers_balance(finance_api: APIClient, scenario: Scenario) -> None:
    response = finance_api.get("/api/v1/reconciliation/", {"month": "2025-09"})
    assert response.status_code == 200, response.content
    body = response.json()
    billed, attributed = _expected_reconciliation(scenario.month)

    assert body["month"] == "2025-09"
    assert body["currency"] == settings.FINOPS_DEFAULT_CURRENCY == "USD"
    assert len(body["by_account"]) == 3
    for row in body["by_account"]:
        key = (row["provider"], row["billing_account_id"], row["currency"])
        assert Decimal(row["billed"]) == billed[key][0]
        assert Decimal(row["billed_cost"]) == billed[key][1]
        assert set(row["attributed"]) == set(CATEGORIES)
        for category in CATEGORIES:
            assert Decimal(row["attributed"][category]) == attributed[key][category]
        assert Decimal(row["idle"]) == attributed[key][Category.IDLE]
        assert Decimal(row["unallocated"]) == attributed[key][Category.UNALLOCATED]
        assert Decimal(row["difference"]) == 0
        for money_key in ("billed", "billed_cost", "idle", "unallocated", "difference"):
            assert isinstance(row[money_key], str)

    # Top level: USD lines only; the EUR account is never added in.
    usd_keys = [k for k in billed if k[2] == "USD"]
    assert Decimal(body["billed"]) == sum(billed[k][0] for k in usd_keys)
    assert Decimal(body["billed"]) == Decimal("1500.875")
    assert Decimal(body["billed_cost"]) == sum(billed[k][1] for k in usd_keys)
    for category in CATEGORIES:
        assert Decimal(body["attributed"][category]) == sum(
            attributed[k][category] for k in usd_keys
        )
    assert Decimal(body["idle"]) == Decimal("220.00")
    assert Decimal(body["unallocated"]) == Decimal("80.00")
    assert body["difference"] == "0.000000000000"


def test_reconciliation_shows_missing_ledger_row(
    finance_api: APIClient, scenario: Scenario
) -> None:
    missing = AllocatedCost.objects.get(provider_name="GCP", category=Category.IDLE)
    missing.delete()
    body = finance_api.get("/api/v1/reconciliation/", {"month": "2025-09"}).json()
    assert Decimal(body["difference"]) == missing.amount
    gcp = next(r for r in body["by_account"] if r["provider"] == "GCP")
    assert Decimal(gcp["difference"]) == missing.amount
    aws = next(r for r in body["by_account"] if r["provider"] == "AWS")
    assert Decimal(aws["difference"]) == 0


@pytest.mark.parametrize(
    "query", [{}, {"month": "2025-9"}, {"month": "sept"}, {"month": "2025-00"}]
)
def test_reconciliation_bad_month_is_400(finance_api: APIClient, query: dict[str, str]) -> None:
    response = finance_api.get("/api/v1/reconciliation/", query)
    assert response.status_code == 400
    assert response.json()["month"]


def test_reconciliation_query_count_is_flat(
    finance_api: APIClient,
    scenario: Scenario,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    # 4 for the figures, 3 for `stale` (the last run, the last successful one, changes since).
    with django_assert_max_num_queries(7):
        assert finance_api.get("/api/v1/reconciliation/", {"month": "2025-09"}).status_code == 200


def test_import_batches_for_finance(
    finance_api: APIClient, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    for _ in range(5):
        ImportBatchFactory.create(row_count=7, error="")
    failed = ImportBatchFactory.create(status="failed", error="bad header")
    with django_assert_max_num_queries(4):
        rows = _results(finance_api.get("/api/v1/import-batches/"))
    assert len(rows) == 6
    assert rows[0]["id"] == failed.id  # newest first
    assert rows[0]["status"] == "failed"
    assert rows[0]["error"] == "bad header"
    assert {"kind", "source", "status", "row_count", "billing_periods", "error"} <= set(rows[0])


def test_schema_is_served_to_logged_in_users(finance_api: APIClient) -> None:
    response = finance_api.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/v1/reconciliation/" in response.content
