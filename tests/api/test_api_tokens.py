"""Per-user API tokens: hashed, read-only, team-limited, expiring, revocable; page and command."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from pytest_django.live_server_helper import LiveServer
from rest_framework.test import APIClient
from selenium.webdriver.remote.webdriver import WebDriver

from finops.org.models import Profile, Team
from finops.tokens.models import ApiToken
from finops.tokens.services import TokenError, api_token_create, api_token_revoke
from tests.chromium import _body, _login, _wait_for_text
from tests.client_types import Response
from tests.factories import Scenario, TeamFactory


def _api(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def _slugs(response: Response) -> list[str]:
    assert response.status_code == 200, response.content
    return [t["slug"] for t in response.json()["results"]]


def test_only_the_hash_of_the_key_is_stored(finance_user: User) -> None:
    created = api_token_create(user=finance_user, name="grafana")
    token = ApiToken.objects.get(pk=created.token.pk)
    assert created.key.startswith("fo_")
    assert len(created.key) > 40
    assert token.key_hash == hashlib.sha256(created.key.encode()).hexdigest()
    assert token.prefix == created.key[:10]
    stored = [str(v) for v in ApiToken.objects.values().get(pk=token.pk).values()]
    assert created.key not in stored


def test_token_authenticates_as_its_user(lead_user: User, scenario: Scenario) -> None:
    key = api_token_create(user=lead_user, name="dash").key
    assert _slugs(_api(key).get("/api/v1/teams/")) == ["vision"]
    # A lead's token is a lead: no finance-only endpoint.
    assert _api(key).get("/api/v1/reconciliation/?month=2025-09").status_code == 403


@pytest.mark.parametrize("state", ["unknown", "revoked", "expired", "inactive_user"])
def test_dead_tokens_get_401_with_www_authenticate(finance_user: User, state: str) -> None:
    created = api_token_create(user=finance_user, name="x")
    key = created.key
    if state == "unknown":
        key = "fo_" + "A" * 43
    elif state == "revoked":
        api_token_revoke(token_id=created.token.pk)
    elif state == "expired":
        ApiToken.objects.filter(pk=created.token.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
    else:
        finance_user.is_active = False
        finance_user.save()
    response = _api(key).get("/api/v1/teams/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")


def test_no_credentials_get_401_with_www_authenticate(db: None) -> None:
    response = APIClient().get("/api/v1/teams/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")


def test_expiry_is_in_the_future_by_the_days_asked(finance_user: User) -> None:
    before = timezone.now()
    token = api_token_create(user=finance_user, name="x", expires_in_days=30).token
    assert token.expires_at is not None
    assert before + timedelta(days=30) <= token.expires_at <= timezone.now() + timedelta(days=30)
    assert (
        _api(api_token_create(user=finance_user, name="y", expires_in_days=1).key)
        .get("/api/v1/teams/")
        .status_code
        == 200
    )


def test_read_only_token_gets_403_on_unsafe_methods(finance_user: User, scenario: Scenario) -> None:
    read_only = _api(api_token_create(user=finance_user, name="ro", read_only=True).key)
    read_write = _api(api_token_create(user=finance_user, name="rw").key)
    assert read_only.get("/api/v1/teams/").status_code == 200
    for method in ("post", "put", "patch", "delete"):
        response = getattr(read_only, method)("/api/v1/anomalies/999999/", {}, format="json")
        assert response.status_code == 403, method
        assert "read-only" in response.json()["detail"]
    # The same request with a read-write token reaches the view (no such anomaly).
    assert read_write.patch("/api/v1/anomalies/999999/", {}, format="json").status_code == 404


def test_team_limited_finance_token_sees_only_those_teams(
    finance_user: User, scenario: Scenario
) -> None:
    key = api_token_create(user=finance_user, name="speech only", team_slugs=["speech"]).key
    api = _api(key)
    assert _slugs(api.get("/api/v1/teams/")) == ["speech"]
    runs = api.get("/api/v1/runs/", {"month": "2025-09"}).json()["results"]
    assert {r["team"] for r in runs} == {"speech"}
    # Limited to teams, it no longer sees org-wide figures.
    assert api.get("/api/v1/reconciliation/?month=2025-09").status_code == 403
    costs = api.get("/api/v1/costs/", {"month": "2025-09"}).json()
    assert [s["key"] for s in costs["series"]] == ["speech"]
    # The same user's unlimited token sees everything.
    unlimited = _api(api_token_create(user=finance_user, name="all").key)
    assert _slugs(unlimited.get("/api/v1/teams/")) == ["speech", "vision"]


def test_team_limit_intersects_the_users_teams_at_use(
    lead_user: User, team: Team, scenario: Scenario
) -> None:
    second = TeamFactory.create(slug="nlp", name="NLP")
    profile = Profile.objects.get(user=lead_user)
    profile.teams.add(second)
    key = api_token_create(user=lead_user, name="x", team_slugs=["vision", "nlp"]).key
    assert _slugs(_api(key).get("/api/v1/teams/")) == ["nlp", "vision"]
    profile.teams.remove(team)  # the lead loses a team: so does the token
    assert _slugs(_api(key).get("/api/v1/teams/")) == ["nlp"]


def test_a_token_cannot_reach_beyond_the_users_teams(lead_user: User, other_team: Team) -> None:
    with pytest.raises(TokenError, match="speech"):
        api_token_create(user=lead_user, name="x", team_slugs=["speech"])
    with pytest.raises(TokenError):
        api_token_create(user=lead_user, name="x", expires_in_days=0)
    assert not ApiToken.objects.exists()


def test_last_used_is_stamped(finance_user: User) -> None:
    created = api_token_create(user=finance_user, name="x")
    assert created.token.last_used_at is None
    before = timezone.now()
    _api(created.key).get("/api/v1/teams/")
    created.token.refresh_from_db()
    assert created.token.last_used_at is not None
    assert created.token.last_used_at >= before


def test_drf_authtoken_keys_still_work(finance_user: User) -> None:
    from rest_framework.authtoken.models import Token

    key = Token.objects.create(user=finance_user).key
    assert _api(key).get("/api/v1/teams/").status_code == 200


# --- command --------------------------------------------------------------------------------


def test_command_creates_lists_and_revokes(lead_user: User, team: Team) -> None:
    out = StringIO()
    call_command(
        "api_token", "create", "--user", "lead", "--name", "grafana", "--read-only",
        "--team", "vision", "--expires-in-days", "7", stdout=out, stderr=StringIO(),
    )  # fmt: skip
    key = out.getvalue().strip()
    token = ApiToken.objects.get(key_hash=hashlib.sha256(key.encode()).hexdigest())
    assert (token.name, token.read_only) == ("grafana", True)
    assert [t.slug for t in token.teams.all()] == ["vision"]
    assert token.expires_at is not None
    assert timedelta(days=6) < token.expires_at - timezone.now() <= timedelta(days=7)
    assert _api(key).get("/api/v1/teams/").status_code == 200

    listing = StringIO()
    call_command("api_token", "list", "--user", "lead", stdout=listing)
    assert "grafana" in listing.getvalue()
    assert key not in listing.getvalue()

    call_command("api_token", "revoke", str(token.pk), stdout=StringIO())
    assert _api(key).get("/api/v1/teams/").status_code == 401


def test_command_refuses_foreign_team_and_unknown_user(lead_user: User, other_team: Team) -> None:
    with pytest.raises(CommandError, match="speech"):
        call_command("api_token", "create", "--user", "lead", "--team", "speech")
    with pytest.raises(CommandError, match="nobody"):
        call_command("api_token", "create", "--user", "nobody")


# --- page -----------------------------------------------------------------------------------


def test_page_needs_login(client: Client, db: None) -> None:
    response = client.get("/account/tokens/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_page_creates_shows_key_once_and_revokes(
    client: Client, lead_user: User, team: Team
) -> None:
    client.force_login(lead_user)
    response = client.post(
        "/account/tokens/",
        {"name": "grafana", "read_only": "on", "teams": [team.pk], "expires_in_days": "90"},
    )
    assert response.status_code == 200
    key = response.context["new_key"]
    assert key.startswith("fo_")
    assert key in response.content.decode()
    assert "no-cache" in response["Cache-Control"] or "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get(user=lead_user)
    assert token.read_only
    assert [t.slug for t in token.teams.all()] == ["vision"]
    # Shown once: the next view of the page lists the token by prefix, not its key.
    page = client.get("/account/tokens/").content.decode()
    assert "grafana" in page
    assert token.prefix in page
    assert key not in page

    response = client.post(f"/account/tokens/{token.pk}/revoke/")
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert _api(key).get("/api/v1/teams/").status_code == 401


def test_page_offers_only_the_users_teams_and_cannot_revoke_others(
    client: Client, lead_user: User, finance_user: User, team: Team, other_team: Team
) -> None:
    client.force_login(lead_user)
    response = client.post("/account/tokens/", {"name": "x", "teams": [other_team.pk]})
    assert response.status_code == 200
    assert response.context["new_key"] is None
    assert not ApiToken.objects.exists()
    foreign = api_token_create(user=finance_user, name="fin").token
    assert client.post(f"/account/tokens/{foreign.pk}/revoke/").status_code == 404
    foreign.refresh_from_db()
    assert foreign.revoked_at is None


@pytest.mark.browser
def test_browser_creates_a_token_that_works_with_curl_like_client(
    browser: WebDriver, live_server: LiveServer, lead_user: User
) -> None:
    import json
    import urllib.request

    from selenium.webdriver.common.by import By

    driver = browser
    _login(driver, live_server.url, "lead", "lead-password-123")
    driver.find_element(By.LINK_TEXT, "API tokens").click()
    _wait_for_text(driver, "New token")
    driver.find_element(By.ID, "id_name").send_keys("grafana")
    driver.find_element(By.ID, "token-create").click()
    _wait_for_text(driver, "Your new token")
    key = driver.find_element(By.ID, "new-token-key").text
    assert key.startswith("fo_")
    assert f'curl -H "Authorization: Token {key}"' in _body(driver)

    request = urllib.request.Request(
        live_server.url + "/api/v1/teams/", headers={"Authorization": f"Token {key}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert [t["slug"] for t in json.load(response)["results"]] == ["vision"]

    driver.find_element(By.NAME, "revoke").click()
    _wait_for_text(driver, "revoked")
    assert "grafana" in _body(driver)
    assert key not in _body(driver)
