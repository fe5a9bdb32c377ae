"""/api/v1/costs/?interval=: flat Grafana-friendly points per bucket and key; the month report
without interval is unchanged."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_django import DjangoAssertNumQueries
from rest_framework.test import APIClient

from finops.attribution.models import Category, TeamDailyCost
from finops.attribution.selectors.timeseries import bucket_start
from finops.currency.models import FxRate
from finops.org.models import Team
from tests.factories import TeamDailyCostFactory

SEPT = dt.date(2025, 9, 1)


def _row(team: Team | None, day: dt.date, amount: str, **kwargs: Any) -> TeamDailyCost:
    billing_period = kwargs.pop("billing_period", day.replace(day=1))
    return TeamDailyCostFactory.create(
        team=team, day=day, amount=Decimal(amount), billing_period=billing_period, **kwargs
    )


@pytest.fixture
def ledger(team: Team, other_team: Team) -> None:
    """Vision: Mon 1 Sep 10.5 + Tue 2 Sep 0.25 (training) + 2 Sep 4 (idle, GCP); Speech:
    Sun 7 Sep 3; no team: 8 Sep 1.000000000001 (shared); October: Vision 1 Oct 7."""
    _row(team, dt.date(2025, 9, 1), "10.5")
    _row(team, dt.date(2025, 9, 2), "0.25")
    _row(team, dt.date(2025, 9, 2), "4", category=Category.IDLE, provider_name="GCP")
    _row(other_team, dt.date(2025, 9, 7), "3")
    _row(None, dt.date(2025, 9, 8), "1.000000000001", category=Category.SHARED)
    _row(team, dt.date(2025, 10, 1), "7")


def _points(api: APIClient, **params: str) -> Any:
    response = api.get("/api/v1/costs/", params)
    assert response.status_code == 200, response.content
    return response.json()


def money(text: str) -> str:
    return f"{Decimal(text):.12f}"


def test_daily_points_per_team(finance_api: APIClient, ledger: None) -> None:
    points = _points(finance_api, month="2025-09", group_by="team", interval="day")
    assert points == [
        {"t": "2025-09-01", "team": "vision", "cost": money("10.5"), "currency": "USD"},
        {"t": "2025-09-02", "team": "vision", "cost": money("4.25"), "currency": "USD"},
        {"t": "2025-09-07", "team": "speech", "cost": money("3"), "currency": "USD"},
        {"t": "2025-09-08", "team": None, "cost": money("1.000000000001"), "currency": "USD"},
    ]


def test_weekly_buckets_start_on_monday(finance_api: APIClient, ledger: None) -> None:
    # 1 Sep 2025 is a Monday: 1-7 Sep is one ISO week, 8 Sep starts the next.
    points = _points(finance_api, month="2025-09", interval="week")
    assert [(p["t"], p["team"], p["cost"]) for p in points] == [
        ("2025-09-01", "speech", money("3")),
        ("2025-09-01", "vision", money("14.75")),
        ("2025-09-08", None, money("1.000000000001")),
    ]


def test_monthly_by_category_and_provider_over_a_day_range(
    finance_api: APIClient, ledger: None
) -> None:
    by_category = _points(
        finance_api, since="2025-09-01", until="2025-10-31", group_by="category", interval="month"
    )
    assert [(p["t"], p["category"], p["cost"]) for p in by_category] == [
        ("2025-09-01", "idle", money("4")),
        ("2025-09-01", "shared", money("1.000000000001")),
        ("2025-09-01", "training", money("13.75")),
        ("2025-10-01", "training", money("7")),
    ]
    assert all(set(p) == {"t", "category", "cost", "currency"} for p in by_category)
    by_provider = _points(
        finance_api, since="2025-09-02", until="2025-09-07", group_by="provider", interval="day"
    )
    assert [(p["t"], p["provider"], p["cost"]) for p in by_provider] == [
        ("2025-09-02", "AWS", money("0.25")),
        ("2025-09-02", "GCP", money("4")),
        ("2025-09-07", "AWS", money("3")),
    ]


def test_a_lead_sees_only_their_teams_and_no_unowned_cost(
    lead_api: APIClient, ledger: None
) -> None:
    points = _points(lead_api, month="2025-09", interval="month")
    assert points == [
        {"t": "2025-09-01", "team": "vision", "cost": money("14.75"), "currency": "USD"}
    ]


def test_late_charge_counts_in_its_billing_month_not_its_day(
    finance_api: APIClient, team: Team
) -> None:
    # An August day on the September invoice: month=2025-09 includes it, bucketed on its day.
    _row(team, dt.date(2025, 8, 30), "2", billing_period=SEPT)
    points = _points(finance_api, month="2025-09", interval="month")
    assert [(p["t"], p["cost"]) for p in points] == [("2025-08-01", money("2"))]


def test_other_currencies_are_converted_per_day(finance_api: APIClient, team: Team) -> None:
    _row(team, dt.date(2025, 9, 1), "10", billing_currency="EUR")
    _row(team, dt.date(2025, 9, 2), "10", billing_currency="EUR")
    _row(team, dt.date(2025, 9, 2), "1")
    for day, rate in ((dt.date(2025, 9, 1), "1.1"), (dt.date(2025, 9, 2), "1.2")):
        FxRate.objects.create(date=day, from_currency="EUR", to_currency="USD", rate=Decimal(rate))
    points = _points(finance_api, month="2025-09", interval="week")
    # 10 x 1.1 + 10 x 1.2 + 1
    assert points == [{"t": "2025-09-01", "team": "vision", "cost": money("24"), "currency": "USD"}]
    eur = _points(finance_api, month="2025-09", interval="day", currency="EUR")
    assert [p["currency"] for p in eur] == ["EUR", "EUR"]


def test_missing_fx_rate_is_400(finance_api: APIClient, team: Team) -> None:
    _row(team, dt.date(2025, 9, 1), "10", billing_currency="EUR")
    response = finance_api.get("/api/v1/costs/", {"month": "2025-09", "interval": "day"})
    assert response.status_code == 400
    assert "EUR" in response.json()["detail"]


@pytest.mark.parametrize(
    "params",
    [
        {"interval": "hour", "month": "2025-09"},
        {"interval": "day"},  # neither month nor since
        {"interval": "day", "month": "2025-09", "since": "2025-09-01"},
        {"interval": "day", "since": "2025-09-02", "until": "2025-09-01"},
        {"interval": "day", "since": "2020-01-01", "until": "2025-01-01"},
        {"since": "2025-09-01"},  # a range without interval
        {},  # the month report still needs its month
        {"interval": "day", "month": "2025-9"},
        {"interval": "day", "month": "0000-01"},  # matches the pattern; no year 0 (fuzz)
        {"month": "0000-01"},
    ],
)
def test_bad_queries_are_400(finance_api: APIClient, params: dict[str, str], db: None) -> None:
    assert finance_api.get("/api/v1/costs/", params).status_code == 400


def test_month_report_without_interval_is_unchanged(finance_api: APIClient, ledger: None) -> None:
    body = _points(finance_api, month="2025-09")
    assert body["month"] == "2025-09"
    assert body["group_by"] == "team"
    assert [s["key"] for s in body["series"]] == ["speech", "vision", None]
    vision = body["series"][1]
    assert [(p["day"], p["amount"]) for p in vision["points"]] == [
        ("2025-09-01", money("10.5")),
        ("2025-09-02", money("4.25")),
    ]


def test_series_query_count_is_flat(
    finance_api: APIClient, team: Team, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    for day in range(1, 29):
        _row(team, dt.date(2025, 9, day), "1")
    with django_assert_max_num_queries(6):  # session/auth, teams, rows, rates
        points = _points(finance_api, month="2025-09", interval="day")
    assert len(points) == 28


@settings(max_examples=200, deadline=None)
@given(day=st.dates(dt.date(2000, 1, 1), dt.date(2100, 12, 31)))
def test_buckets_hold_their_day(day: dt.date) -> None:
    week = bucket_start(day, "week")
    assert week.weekday() == 0
    assert week <= day < week + dt.timedelta(days=7)
    month = bucket_start(day, "month")
    assert month.day == 1
    assert (month.year, month.month) == (day.year, day.month)
    assert bucket_start(day, "day") == day
