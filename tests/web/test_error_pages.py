"""Error pages use the site's layout and say what went wrong in words; an empty month keeps
its own name in the month picker."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client, RequestFactory
from django.urls import reverse
from pytest_django import Settings

from finops.org.models import Team
from finops.web import errors
from tests.client_types import Response


def _text(response: Response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_month_13_is_a_friendly_400_in_the_layout(finance_client: Client) -> None:
    response = finance_client.get(reverse("web:overview"), {"month": "2026-13"})
    assert response.status_code == 400
    html = _text(response)
    assert 'data-testid="error-400"' in html
    assert "“2026-13” is not a month: use YYYY-MM, e.g. 2025-09." in html
    # The layout: the menu with the user's name.
    assert 'class="topbar"' in html
    assert "fin · finance" in html
    assert "Bad Request (400)" not in html


def test_other_bad_requests_keep_their_message_private(rf: RequestFactory) -> None:
    from django.core.exceptions import SuspiciousOperation

    request = rf.get("/")
    request.user = None  # type: ignore[assignment]  # a request no middleware has seen
    response = errors.bad_request(request, SuspiciousOperation("Host header secret"))
    assert response.status_code == 400
    assert "Host header secret" not in response.content.decode()


def test_404_in_the_layout(finance_client: Client) -> None:
    response = finance_client.get("/teams/no-such-team/")
    assert response.status_code == 404
    assert 'data-testid="error-404"' in _text(response)


def test_403_in_the_layout(client: Client, lead_user: User) -> None:
    client.force_login(lead_user)
    response = client.get(reverse("web:reconciliation"))
    assert response.status_code == 403
    html = _text(response)
    assert 'data-testid="error-403"' in html
    assert "lead · team lead" in html


def test_500_in_the_layout_without_the_database(settings: Settings) -> None:
    settings.ROOT_URLCONF = "tests.error_urls"
    client = Client(raise_request_exception=False)
    response = client.get("/boom/")
    assert response.status_code == 500
    assert 'data-testid="error-500"' in _text(response)


def test_empty_month_is_the_one_selected_in_the_picker(finance_client: Client, team: Team) -> None:
    from decimal import Decimal

    from tests.factories import TeamDailyCostFactory

    TeamDailyCostFactory.create(team=team, amount=Decimal(1))  # September 2025 has data
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2024-02"}))
    assert '<option value="2024-02" selected>February 2024</option>' in html
    assert '<option value="2025-09">September 2025</option>' in html
    assert "Attributed cost · February 2024" in html
