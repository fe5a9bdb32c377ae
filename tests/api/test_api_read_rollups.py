"""The requests bench/api_load.py drives (a team's month summary, a runs page, the daily cost
series, the budgets list) read rollups, never the raw ledger, in a flat number of queries,
through the real token authentication; a cached answer reads no report table at all."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pytest_django import DjangoAssertNumQueries, Settings
from rest_framework.test import APIClient

from finops.budgets.services import budget_create
from finops.currency.models import FxRate
from finops.org.models import Team
from finops.tokens.services import api_token_create
from tests.factories import RunCostFactory, TeamDailyCostFactory, TeamFactory, build_month_scenario

SUMMARY = "/api/v1/costs/?month=2025-09&interval=month&group_by=category"
RUNS = "/api/v1/runs/?month=2025-09&limit=100&offset=0"
SERIES = "/api/v1/costs/?month=2025-09&group_by=team&interval=day"
BUDGETS = "/api/v1/budgets/?as_of=2025-09-20"
RAW = ("billing_ingest_costlineitem", "attribution_allocatedcost", "billing_ingest_jobrecord")
REPORT_TABLES = ("attribution_teamdailycost", "attribution_runcost", "budgets_budget", *RAW)


@pytest.fixture
def month(team: Team, other_team: Team) -> None:
    FxRate.objects.create(
        date=dt.date(2025, 8, 29), from_currency="EUR", to_currency="USD", rate=Decimal("1.1")
    )
    build_month_scenario(team=team, other_team=other_team)
    # More teams, days and runs: the query count must not grow with them.
    for i in range(15):
        extra = TeamFactory.create(slug=f"extra-{i}")
        RunCostFactory.create(team=extra, run_id=f"run-{i}")
        for day in range(1, 29, 3):
            TeamDailyCostFactory.create(
                team=extra, day=dt.date(2025, 9, day), amount=Decimal("1.25")
            )


def _token_client(user: User) -> APIClient:
    client = APIClient()
    key = api_token_create(user=user, name="bench", read_only=True).key
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _sql(queries: CaptureQueriesContext) -> str:
    return "\n".join(q["sql"] for q in queries)


@pytest.mark.parametrize(
    ("url", "who", "most"),
    [
        # The token with its user and profile; then the report's own queries (a lead's teams
        # are a subquery of them).
        (SUMMARY, "lead", 3),
        (RUNS, "finance", 4),
        (SERIES, "finance", 4),
    ],
)
def test_reports_read_rollups_in_flat_queries(
    month: None,
    finance_user: User,
    lead_user: User,
    django_assert_max_num_queries: DjangoAssertNumQueries,
    url: str,
    who: str,
    most: int,
) -> None:
    client = _token_client(finance_user if who == "finance" else lead_user)
    assert client.get(url).status_code == 200  # token's last_used_at stamped once, before
    with django_assert_max_num_queries(most) as queries:
        assert client.get(url).status_code == 200
    assert not any(table in _sql(queries) for table in RAW)


def test_budgets_list_reads_no_raw_line_items(
    month: None,
    finance_user: User,
    team: Team,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    budget_create(user=finance_user, data={"name": "GPU", "team": team.slug, "amount": "9"})
    budget_create(
        user=finance_user,
        data={"name": "Seg", "team": team.slug, "tag": "project=seg", "amount": "9"},
    )
    client = _token_client(finance_user)
    client.get(BUDGETS)
    with django_assert_max_num_queries(50) as queries:
        assert client.get(BUDGETS).status_code == 200
    assert not any(table in _sql(queries) for table in RAW)


def _budgets_list_queries(client: APIClient) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(BUDGETS)
    assert response.status_code == 200
    return len(queries)


def test_budgets_list_queries_do_not_grow_with_budgets(
    month: None, finance_user: User, team: Team, other_team: Team
) -> None:
    client = _token_client(finance_user)
    client.get(BUDGETS)  # token's last_used_at stamped once, before
    scopes: list[dict[str, str]] = [
        {"team": team.slug},
        {"team": other_team.slug, "tag": "project=seg"},
        {"provider": "AWS"},
        {},
    ]
    for i, scope in enumerate(scopes):
        budget_create(user=finance_user, data={"name": f"b{i}", "amount": "9", **scope})
    few = _budgets_list_queries(client)
    for i in range(12):
        scope = {**scopes[i % 4], "tag": f"project=p{i}"} if i % 4 == 1 else scopes[i % 4]
        budget_create(user=finance_user, data={"name": f"more{i}", "amount": "9", **scope})
    assert len(client.get(BUDGETS).json()["results"]) == 16
    assert _budgets_list_queries(client) == few


@pytest.mark.parametrize("url", [SUMMARY, RUNS, SERIES, BUDGETS])
def test_a_cached_answer_reads_no_report_table(
    settings: Settings,
    month: None,
    finance_user: User,
    lead_user: User,
    django_assert_max_num_queries: DjangoAssertNumQueries,
    url: str,
) -> None:
    settings.FINOPS_API_CACHE_SECONDS = 300
    cache.clear()
    client = _token_client(lead_user if url == SUMMARY else finance_user)
    first = client.get(url)
    assert first.status_code == 200
    # One query: the token with its user, profile, whether it is limited to teams, and the
    # data version the answer is keyed by; for a lead also the visible teams (the scope).
    with django_assert_max_num_queries(2 if url == SUMMARY else 1) as queries:
        again = client.get(url)
    assert again.content == first.content
    assert not any(table in _sql(queries) for table in REPORT_TABLES)
    cache.clear()
