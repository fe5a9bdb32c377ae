"""The runs page and the flat cost series are built as plain dicts (finops/api/rows.py): the
body must be exactly what the documented serializers (RunCostSerializer, CostPointSerializer)
give for the same rows, so the OpenAPI schema still describes it."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.contrib.auth.models import User
from pytest_django import DjangoAssertNumQueries, Settings
from rest_framework.test import APIClient, APIRequestFactory

from finops.api.rows import cost_point_bodies
from finops.api.serializers import CostPointSerializer, RunCostSerializer
from finops.attribution.models import RunCost
from finops.attribution.selectors.timeseries import CostPoint
from finops.org.models import Team
from tests.factories import RunCostFactory, TeamFactory

RUNS = "/api/v1/runs/?month=2025-09&limit=1000"


def _edge_runs(team: Team) -> None:
    """Rows with the values a serializer formats specially."""
    RunCostFactory.create(team=team, run_id="plain")
    RunCostFactory.create(team=None, run_id="no-team", cost=Decimal("0.000000000001"))
    RunCostFactory.create(team=team, run_id="no-gpu", gpu_seconds=Decimal(0), first_start=None)
    RunCostFactory.create(
        team=team,
        run_id="many-places",
        cost=Decimal("12345.678901234567"),
        wasted_cost=Decimal("1.5"),
        gpu_seconds=Decimal("7.123456"),
        first_start=dt.datetime(2025, 9, 1, 3, 4, 5, 123456, tzinfo=dt.UTC),
        last_end=dt.datetime(2025, 9, 2, tzinfo=dt.UTC),
        list_cost=Decimal("20000"),
        list_cost_estimated=Decimal("3.25"),
        cost_on_demand=Decimal("10000.1"),
        cost_spot=Decimal("2345.578901234567"),
        running_jobs=2,
        failed_jobs=1,
    )


def test_runs_page_equals_the_serializer(
    settings: Settings, finance_user: User, team: Team
) -> None:
    settings.ALLOWED_HOSTS = ["finops.example"]  # the URLs hold the host and port
    _edge_runs(team)
    api = APIClient()
    api.force_authenticate(finance_user)
    response = api.get(RUNS, HTTP_HOST="finops.example:8443")
    assert response.status_code == 200
    body = response.json()["results"]
    request = APIRequestFactory().get(RUNS, HTTP_HOST="finops.example:8443")
    ids = [row["id"] for row in body]
    by_id = {run.pk: run for run in RunCost.objects.select_related("team").filter(pk__in=ids)}
    expected = RunCostSerializer(
        [by_id[pk] for pk in ids], many=True, context={"request": request}
    ).data
    assert len(body) == 4
    assert body == [dict(row) for row in expected]
    # Field order too: a client diffing two answers sees no change.
    assert [list(row) for row in body] == [list(row) for row in expected]
    assert body[0]["url"].startswith("http://finops.example:8443/api/v1/runs/")


def test_cost_points_equal_the_serializer() -> None:
    points = [
        CostPoint(t=dt.date(2025, 9, 1), key="vision", cost=Decimal("1.5"), currency="USD"),
        CostPoint(t=dt.date(2025, 9, 2), key=None, cost=Decimal("0.000000000001"), currency="EUR"),
        CostPoint(
            t=dt.date(2025, 9, 3), key="AWS", cost=Decimal("123456789.123456789012"), currency="USD"
        ),
    ]
    for group_by in ("team", "provider", "category"):
        expected = CostPointSerializer(points, many=True, context={"group_by": group_by}).data
        fast = cost_point_bodies(points, group_by)
        assert fast == [dict(row) for row in expected]
        assert [list(row) for row in fast] == [list(row) for row in expected]


def test_runs_page_reads_rollups_in_a_flat_number_of_queries(
    finance_user: User, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    for i in range(40):
        RunCostFactory.create(team=TeamFactory.create(slug=f"t{i}"), run_id=f"r{i}")
    api = APIClient()
    api.force_authenticate(finance_user)
    # The count and the page (the user is already authenticated: no token queries).
    with django_assert_max_num_queries(3) as queries:
        assert len(api.get(RUNS).json()["results"]) == 40
    assert not any("costlineitem" in q["sql"] or "allocatedcost" in q["sql"] for q in queries)
