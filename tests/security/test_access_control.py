"""Access control: login everywhere, finance sees all, leads see their teams, CSRF, tokens."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import ImportBatchFactory, Scenario

PAGES = [
    "/",
    "/?month=2025-09",
    "/teams/vision/?month=2025-09",
    "/runs/vision/llama/7b%20v2/?month=2025-09",
    "/reconciliation/?month=2025-09",
    "/imports/",
    "/channels/",
]
API = [
    "/api/v1/",
    "/api/v1/teams/",
    "/api/v1/teams/vision/",
    "/api/v1/runs/?month=2025-09",
    "/api/v1/reconciliation/?month=2025-09",
    "/api/v1/waste/?month=2025-09",
    "/api/v1/import-batches/",
    "/api/v1/notification-channels/",
    "/api/schema/",
]


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_pages_redirect_to_login(client: Client, scenario: Scenario, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


@pytest.mark.parametrize("url", API)
def test_anonymous_api_is_refused(scenario: Scenario, url: str) -> None:
    response = APIClient().get(url)
    assert response.status_code in (401, 403)
    assert b"llama" not in response.content
    assert b"Vision" not in response.content


def test_login_page_renders(client: Client) -> None:
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b'name="csrfmiddlewaretoken"' in response.content


def test_lead_is_kept_out_of_other_teams_and_finance_pages(
    client: Client, lead_user: User, scenario: Scenario
) -> None:
    client.force_login(lead_user)
    assert client.get("/teams/vision/?month=2025-09").status_code == 200
    assert client.get("/runs/vision/llama/7b%20v2/?month=2025-09").status_code == 200
    assert client.get("/teams/speech/?month=2025-09").status_code == 404
    assert client.get("/runs/speech/asr-1/?month=2025-09").status_code == 404
    assert client.get("/reconciliation/?month=2025-09").status_code == 403
    assert client.get("/imports/").status_code == 403


def test_lead_api_is_filtered_and_finance_endpoints_refused(
    lead_user: User, scenario: Scenario
) -> None:
    api = APIClient()
    api.force_authenticate(lead_user)
    assert api.get("/api/v1/teams/speech/").status_code == 404
    assert api.get("/api/v1/reconciliation/?month=2025-09").status_code == 403
    assert api.get("/api/v1/import-batches/").status_code == 403
    runs = api.get("/api/v1/runs/?month=2025-09").json()["results"]
    assert [r["team"] for r in runs] == ["vision"]


def test_user_without_profile_sees_no_team(
    client: Client, django_user_model: type[User], scenario: Scenario
) -> None:
    nobody = django_user_model.objects.create_user("nobody", password="nobody-pass-123")
    client.force_login(nobody)
    assert client.get("/teams/vision/").status_code == 404
    assert client.get("/reconciliation/").status_code == 403
    assert b"Vision" not in client.get("/?month=2025-09").content


def test_superuser_counts_as_finance(
    client: Client, django_user_model: type[User], scenario: Scenario
) -> None:
    admin = django_user_model.objects.create_superuser("root", password="root-pass-123")
    client.force_login(admin)
    assert client.get("/teams/speech/?month=2025-09").status_code == 200
    assert client.get("/reconciliation/?month=2025-09").status_code == 200


def test_token_auth_works(lead_user: User, finance_user: User, scenario: Scenario) -> None:
    ImportBatchFactory.create()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=lead_user).key)
    assert [t["slug"] for t in api.get("/api/v1/teams/").json()["results"]] == ["vision"]
    assert api.get("/api/v1/reconciliation/?month=2025-09").status_code == 403
    api.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=finance_user).key)
    assert api.get("/api/v1/reconciliation/?month=2025-09").status_code == 200
    assert api.get("/api/v1/import-batches/").status_code == 200
    api.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert api.get("/api/v1/teams/").status_code in (401, 403)


def test_csrf_enforced_on_login_and_logout(finance_user: User) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post(reverse("login"), {"username": "fin", "password": "fin-password-123"})
    assert response.status_code == 403
    client.get(reverse("login"))  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(
        reverse("login"),
        {"username": "fin", "password": "fin-password-123", "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    # Logout is a POST with the token; a GET does not log out.
    assert client.get(reverse("logout")).status_code == 405
    assert client.post(reverse("logout")).status_code == 403
    token = client.cookies["csrftoken"].value
    client.post(reverse("logout"), {"csrfmiddlewaretoken": token})
    assert client.get("/").status_code == 302


def test_session_api_write_needs_csrf(finance_user: User) -> None:
    # Read-only API, but session-authenticated unsafe methods must still hit the CSRF check.
    client = APIClient(enforce_csrf_checks=True)
    # django-axes needs the request to authenticate against.
    client.login(request=HttpRequest(), username="fin", password="fin-password-123")
    assert client.post("/api/v1/teams/", {"slug": "x", "name": "X"}).status_code == 403
