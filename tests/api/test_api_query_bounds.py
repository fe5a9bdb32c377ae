"""Bad query values are a 400 naming the field, never a 500 (issue 9, item 6).

The probe's repro: ?limit=9223372036854775808 on any list (one past 2^63 - 1: the database
driver overflows) and ?month=0000-01 (year 0 does not exist) on costs, endpoints and
reconciliation. A page is at most MAX_LIMIT rows.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from finops.api.pagination import MAX_LIMIT
from tests.factories import ImportBatchFactory, RunCostFactory, TeamFactory

pytestmark = pytest.mark.django_db

LISTS = ["/api/v1/teams/", "/api/v1/runs/", "/api/v1/import-batches/"]
MONTHS = ["/api/v1/costs/", "/api/v1/endpoints/", "/api/v1/reconciliation/", "/api/v1/runs/"]


@pytest.fixture
def api(finance_user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(finance_user)
    return client


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("value", ["9223372036854775808", "-1", "0", "ten", str(MAX_LIMIT + 1)])
def test_out_of_range_limit_is_400_naming_it(api: APIClient, url: str, value: str) -> None:
    response = api.get(url, {"limit": value})
    assert response.status_code == 400, response.content
    assert "limit" in response.json()


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("value", ["9223372036854775808", "-5", "x"])
def test_out_of_range_offset_is_400_naming_it(api: APIClient, url: str, value: str) -> None:
    response = api.get(url, {"offset": value})
    assert response.status_code == 400, response.content
    assert "offset" in response.json()


def test_page_size_is_capped_and_limits_inside_it_work(api: APIClient) -> None:
    team = TeamFactory.create()
    RunCostFactory.create_batch(3, team=team)
    rows = api.get("/api/v1/runs/", {"limit": 2, "offset": 1}).json()
    assert (rows["count"], len(rows["results"])) == (3, 2)
    assert api.get("/api/v1/runs/", {"limit": MAX_LIMIT}).status_code == 200


@pytest.mark.parametrize("url", MONTHS)
@pytest.mark.parametrize("month", ["0000-01", "9999-12", "1969-12"])
def test_month_out_of_range_is_400_naming_it(api: APIClient, url: str, month: str) -> None:
    response = api.get(url, {"month": month})
    assert response.status_code == 400, response.content
    assert "month" in response.json()


@pytest.mark.parametrize("month", ["0000-01", "9999-12"])
@pytest.mark.parametrize("name", ["web:overview", "web:endpoints", "web:reconciliation"])
def test_pages_answer_400_for_the_same_months(
    client: Client, finance_user: User, name: str, month: str
) -> None:
    client.force_login(finance_user)
    assert client.get(reverse(name), {"month": month}).status_code == 400


def test_import_batch_list_still_pages(api: APIClient) -> None:
    ImportBatchFactory.create_batch(3)
    body = api.get("/api/v1/import-batches/", {"limit": 1}).json()
    assert body["count"] == 3
    assert len(body["results"]) == 1
    assert body["next"]


def _schema_gets(api: APIClient) -> dict[str, list[str]]:
    """Every GET path of the published schema without a path parameter, with the names of its
    query parameters: a list or report added later is checked without editing this test."""
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    gets = {}
    for path, operations in schema["paths"].items():
        if "{" in path or "get" not in operations:
            continue
        params = [p["name"] for p in operations["get"].get("parameters", []) if p["in"] == "query"]
        gets[path] = params
    return gets


def test_every_paged_list_and_month_parameter_is_bounded(api: APIClient) -> None:
    gets = _schema_gets(api)
    paged = [path for path, params in gets.items() if "limit" in params]
    monthly = [path for path, params in gets.items() if "month" in params]
    # The lists and reports the probe hit are among them.
    assert set(LISTS) <= set(paged)
    assert set(MONTHS) <= set(monthly)
    for path in paged:
        response = api.get(path, {"limit": "9223372036854775808"})
        assert response.status_code == 400, (path, response.content)
        assert "limit" in response.json(), path
    for path in monthly:
        response = api.get(path, {"month": "0000-01"})
        assert response.status_code == 400, (path, response.content)
        assert "month" in response.json(), path
