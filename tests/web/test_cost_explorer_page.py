"""The cost explorer page (/explorer/): the same FilterSet and figures as the API, a stacked
chart drawn from its data table, a CSV link to the API; leads see their teams only."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.explorer_month import explorer_month  # noqa: F401 - fixtures/explorer/

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("explorer_month")]


def test_finance_groups_by_region_monthly(finance_client: Client) -> None:
    page = finance_client.get(
        "/explorer/", {"month": "2025-09", "group_by": "region", "interval": "month"}
    )
    assert page.status_code == 200
    text = page.content.decode()
    # 55 + 100 + 48 = 203.00 USD amortised; the chart reads the table.
    assert 'data-testid="explorer-total">203.00 USD' in text
    assert 'data-chart="explorer-table"' in text
    assert "us-west-2 (USD)" in text
    assert "48.00 USD" in text
    assert "/api/v1/costs/?group_by=region" in text
    assert "format=csv" in text


def test_invoiced_and_a_tag_filter(finance_client: Client) -> None:
    page = finance_client.get(
        "/explorer/",
        {"month": "2025-09", "group_by": "service", "cost": "invoiced", "tag": "project=llm"},
    )
    assert page.status_code == 200
    assert 'data-testid="explorer-total">120.00 USD' in page.content.decode()


def test_lead_sees_their_team_and_not_the_bill(
    lead_client: Client,
) -> None:
    page = lead_client.get("/explorer/", {"month": "2025-09", "group_by": "service"})
    assert page.status_code == 200
    # Vision: 100 USD EC2 + 50 EUR (55 USD) Compute Engine.
    assert 'data-testid="explorer-total">155.00 USD' in page.content.decode()
    assert b"Speech" not in page.content
    page = lead_client.get("/explorer/", {"month": "2025-09", "group_by": "region"})
    assert page.status_code == 400
    assert b"finance only" in page.content
    # A refused question shows no total, CSV link or "no cost" line (it was not answered).
    assert b"explorer-total" not in page.content
    assert b"No cost matches" not in page.content


@pytest.mark.parametrize("params", [{"group_by": "colour"}, {"tag": "x"}, {"team": "a b"}])
def test_bad_parameters_are_400_naming_them(
    finance_client: Client,
    params: dict[str, Any],
) -> None:
    page = finance_client.get("/explorer/", {"month": "2025-09", **params})
    assert page.status_code == 400
    assert next(iter(params)).encode() in page.content


def test_login_required(client: Client) -> None:
    response = client.get("/explorer/")
    assert response.status_code == 302


def test_span_of_months(finance_client: Client) -> None:
    # Three months up to October 2025: September's 203.00 USD is in them.
    page = finance_client.get("/explorer/", {"month": "2025-10", "span": "3", "group_by": "region"})
    assert page.status_code == 200
    assert 'data-testid="explorer-total">203.00 USD' in page.content.decode()
    assert finance_client.get("/explorer/", {"span": "5"}).status_code == 400


def test_a_lead_is_offered_only_what_they_may_ask(lead_user: User, finance_user: User) -> None:
    """The bill's dimensions (region, instance type, tags, invoiced cost) are finance only: a
    lead's form does not offer them only to refuse them (h-pages); finance's does."""
    pages = {}
    for name, user in (("lead", lead_user), ("finance", finance_user)):
        client = Client()
        client.force_login(user)
        pages[name] = client.get("/explorer/", {"month": "2025-09"}).content.decode()
    lead, finance = pages["lead"], pages["finance"]
    for offered in (
        'id="ex-region"', 'id="ex-instance_type"', 'id="ex-tag"', 'value="invoiced"',
        '<option value="region">', '<option value="instance_type">', '<option value="tag:">',
    ):  # fmt: skip
        assert offered in finance, offered
        assert offered not in lead, offered
    for kept in ('id="ex-provider"', 'id="ex-account"', 'id="ex-service"', 'id="ex-team"',
                 '<option value="service">'):  # fmt: skip
        assert kept in lead, kept


def test_the_summary_names_one_month_once(finance_client: Client) -> None:
    one = finance_client.get("/explorer/", {"month": "2025-09"}).content.decode()
    assert 'data-testid="explorer-summary">September 2025, by team' in one  # not "... to ..."
    three = finance_client.get("/explorer/", {"month": "2025-10", "span": "3"}).content.decode()
    assert 'data-testid="explorer-summary">August 2025 to October 2025, by team' in three
