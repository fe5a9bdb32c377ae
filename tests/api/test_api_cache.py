"""Cached API answers (finops/api/cache.py): new data shows in the next response, and the
caller's scope is part of the key, so a lead never gets finance's body."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings
from rest_framework.test import APIClient

from finops.attribution.models import TeamDailyCost
from finops.attribution.services import attribution_month_run
from finops.budgets.services import budget_create
from finops.currency.models import FxRate
from finops.org.models import Team
from finops.org.selectors import data_version_current
from finops.org.services import data_version_bump
from finops.tokens.services import api_token_create
from tests.factories import Scenario, build_month_scenario

COSTS = "/api/v1/costs/?month=2025-09&interval=month&group_by=team"


@pytest.fixture
def cache_on(settings: Settings) -> Iterator[None]:
    settings.FINOPS_API_CACHE_SECONDS = 300
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def scenario(team: Team, other_team: Team) -> Scenario:
    # The Azure account bills in EUR: one rate before the month converts its days.
    FxRate.objects.create(
        date=dt.date(2025, 8, 29), from_currency="EUR", to_currency="USD", rate=Decimal("1.1")
    )
    return build_month_scenario(team=team, other_team=other_team)


def _api(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _token_api(user: User) -> APIClient:
    """A client with an API token: its request reads the data version in the token's query."""
    client = APIClient()
    key = api_token_create(user=user, name="dashboard", read_only=True).key
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _fresh(settings: Settings, user: User, url: str) -> Any:
    """The answer computed now, bypassing the cache."""
    settings.FINOPS_API_CACHE_SECONDS = 0
    try:
        response = _api(user).get(url)
    finally:
        settings.FINOPS_API_CACHE_SECONDS = 300
    assert response.status_code == 200, response.content
    return response.json()


def _team_totals(body: list[dict[str, Any]]) -> dict[str | None, Decimal]:
    totals: dict[str | None, Decimal] = {}
    for point in body:
        totals[point["team"]] = totals.get(point["team"], Decimal(0)) + Decimal(point["cost"])
    return totals


@pytest.mark.parametrize("make_client", [_api, _token_api], ids=["session", "token"])
def test_answer_is_served_from_the_cache_until_the_data_version_moves(
    cache_on: None,
    settings: Settings,
    finance_user: User,
    scenario: Scenario,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    make_client: Callable[[User], APIClient],
) -> None:
    api = make_client(finance_user)
    first = api.get(COSTS).json()
    # A write that bypasses every service (no bump): the cached body is still served, which
    # shows the cache is really in use.
    TeamDailyCost.objects.filter(team=scenario.team).update(amount=Decimal("1000000"))
    assert api.get(COSTS).json() == first
    with django_capture_on_commit_callbacks(execute=True):
        data_version_bump()
    after = api.get(COSTS).json()
    assert after != first
    assert after == _fresh(settings, finance_user, COSTS)
    assert _team_totals(after)[scenario.team.slug] > _team_totals(first)[scenario.team.slug]


def test_an_attribution_run_shows_in_the_next_response(
    cache_on: None,
    settings: Settings,
    finance_user: User,
    scenario: Scenario,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    api = _api(finance_user)
    before_version = data_version_current()
    api.get(COSTS)
    # Stale on purpose: the rollups differ from what attribution would write.
    TeamDailyCost.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        attribution_month_run(month=scenario.month)
    assert data_version_current() > before_version
    assert api.get(COSTS).json() == _fresh(settings, finance_user, COSTS)
    assert TeamDailyCost.objects.exists()


def test_a_new_budget_shows_in_the_next_budgets_list(
    cache_on: None,
    finance_user: User,
    team: Team,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    api = _api(finance_user)
    assert api.get("/api/v1/budgets/").json()["results"] == []
    with django_capture_on_commit_callbacks(execute=True):
        budget_create(
            user=finance_user,
            data={"name": "GPU", "team": team.slug, "amount": "100", "currency": "USD"},
        )
    names = [b["name"] for b in api.get("/api/v1/budgets/").json()["results"]]
    assert names == ["GPU"]


def test_a_lead_never_gets_the_finance_body(
    cache_on: None, finance_user: User, lead_user: User, scenario: Scenario
) -> None:
    finance_body = _api(finance_user).get(COSTS).json()
    assert {p["team"] for p in finance_body} >= {scenario.team.slug, scenario.other_team.slug}
    lead_body = _api(lead_user).get(COSTS).json()
    # The lead's own team only: the finance answer cached under the same URL is not theirs.
    assert {p["team"] for p in lead_body} == {scenario.team.slug}
    runs = "/api/v1/runs/?month=2025-09"
    assert {r["team"] for r in _api(finance_user).get(runs).json()["results"]} == {
        scenario.team.slug,
        scenario.other_team.slug,
    }
    assert {r["team"] for r in _api(lead_user).get(runs).json()["results"]} == {scenario.team.slug}


def test_a_lead_given_another_team_sees_it_at_once(
    cache_on: None, lead_user: User, scenario: Scenario
) -> None:
    api = _api(lead_user)
    assert {p["team"] for p in api.get(COSTS).json()} == {scenario.team.slug}
    # Membership is not data the version covers: the scope (the visible team ids) is in the key.
    lead_user.finops_profile.teams.add(scenario.other_team)
    assert {p["team"] for p in api.get(COSTS).json()} == {
        scenario.team.slug,
        scenario.other_team.slug,
    }


def test_only_json_gets_cached(cache_on: None, finance_user: User, scenario: Scenario) -> None:
    api = _api(finance_user)
    api.get(COSTS)
    csv = api.get(COSTS + "&format=csv")
    assert csv.status_code == 200
    assert csv["Content-Type"].startswith("text/csv")
