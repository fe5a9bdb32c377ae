"""Single sign-on through a REAL OpenID Connect provider (npm's oidc-provider, started here):
the provider's groups give roles and teams by the sign-in rules finance keeps (SsoRule), and
each person then sees what the role allows. Skips without node + `make oidc`, unless
FINOPS_REQUIRE_OIDC=1 (CI)."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import CommandError, call_command
from pytest_django.live_server_helper import LiveServer

from finops.org.models import Profile, SsoRule, Team
from tests.oidc_provider import Provider, oidc_provider, sso_login, sso_settings


@pytest.fixture
def provider(live_server: LiveServer, settings: Any) -> Iterator[Provider]:
    with oidc_provider(live_server.url) as running:
        sso_settings(settings, running)
        yield running


@pytest.fixture
def rules(team: Team, other_team: Team) -> None:
    """fixtures/oidc/accounts.json: fiona is in finops-finance, lee in ml-research-leads,
    vic in finops-auditors, sam only in staff (no rule)."""
    SsoRule.objects.create(value="finops-finance", role=Profile.Role.FINANCE)
    SsoRule.objects.create(value="ml-research-leads", role=Profile.Role.TEAM_LEAD, team=team)
    SsoRule.objects.create(value="finops-auditors", role=Profile.Role.VIEWER)


def _teams(session: requests.Session, site: str) -> list[str]:
    answer = session.get(f"{site}/api/v1/teams/", timeout=30)
    assert answer.status_code == 200, answer.text[:300]
    return sorted(t["slug"] for t in answer.json()["results"])


@pytest.mark.usefixtures("rules")
def test_a_lead_signs_in_and_sees_only_their_team(
    provider: Provider, live_server: LiveServer
) -> None:
    site = live_server.url
    session, landed = sso_login(site, "lee", "lee-company-pass")
    assert landed == f"{site}/", landed
    user = User.objects.get(email="lee@example.com")
    assert user.username == "lee"
    assert not user.has_usable_password()
    assert user.finops_profile.role == Profile.Role.TEAM_LEAD
    assert [t.slug for t in user.finops_profile.teams.all()] == ["vision"]
    assert _teams(session, site) == ["vision"]
    assert session.get(f"{site}/teams/vision/", timeout=30).status_code == 200
    assert session.get(f"{site}/teams/speech/", timeout=30).status_code in (403, 404)
    assert session.get(f"{site}/close/", timeout=30).status_code == 403


@pytest.mark.usefixtures("rules")
def test_finance_signs_in_and_sees_every_team(provider: Provider, live_server: LiveServer) -> None:
    site = live_server.url
    session, landed = sso_login(site, "fiona", "fiona-company-pass")
    assert landed == f"{site}/", landed
    assert User.objects.get(email="fiona@example.com").finops_profile.role == "finance"
    assert _teams(session, site) == ["speech", "vision"]
    assert session.get(f"{site}/teams/speech/", timeout=30).status_code == 200
    assert session.get(f"{site}/close/", timeout=30).status_code == 200
    assert session.get(f"{site}/onboarding/", timeout=30).status_code == 200


@pytest.mark.usefixtures("rules")
def test_a_viewer_signs_in_and_sees_all_but_changes_nothing(
    provider: Provider, live_server: LiveServer
) -> None:
    site = live_server.url
    session, _ = sso_login(site, "vic", "vic-company-pass")
    assert _teams(session, site) == ["speech", "vision"]
    token = session.cookies.get("csrftoken") or ""
    refused = session.post(
        f"{site}/api/v1/budgets/", json={}, headers={"X-CSRFToken": token}, timeout=30
    )
    assert refused.status_code == 403


@pytest.mark.usefixtures("rules")
def test_no_rule_no_access_and_a_wrong_password_stays_at_the_provider(
    provider: Provider, live_server: LiveServer
) -> None:
    site = live_server.url
    session, landed = sso_login(site, "sam", "sam-company-pass")
    assert landed.startswith(f"{site}/accounts/login/"), landed
    assert not User.objects.filter(email="sam@example.com").exists()
    assert session.get(f"{site}/api/v1/teams/", timeout=30).status_code in (401, 403)

    _, landed = sso_login(site, "lee", "not-lees-password")
    assert landed.startswith(provider.issuer), landed
    assert not User.objects.filter(email="lee@example.com").exists()


@pytest.mark.usefixtures("rules")
def test_the_provider_decides_at_every_sign_in(
    provider: Provider, live_server: LiveServer, other_team: Team
) -> None:
    """A local account with lee's address is taken over (matched by email) and its role follows
    the rules: after finance moves the group to another team, the next sign-in moves lee too."""
    local = User.objects.create_user("lee.local", email="LEE@example.com", password="x" * 16)
    Profile.objects.create(user=local, role=Profile.Role.FINANCE)
    site = live_server.url
    session, _ = sso_login(site, "lee", "lee-company-pass")
    assert _teams(session, site) == ["vision"]
    local.refresh_from_db()
    assert local.finops_profile.role == Profile.Role.TEAM_LEAD
    SsoRule.objects.filter(value="ml-research-leads").update(team=other_team)
    session, _ = sso_login(site, "lee", "lee-company-pass")
    assert _teams(session, site) == ["speech"]
    assert User.objects.filter(email__iexact="lee@example.com").count() == 1


def test_local_passwords_off_refuses_the_password_form(
    client: Any, finance_user: User, settings: Any
) -> None:
    settings.FINOPS_LOCAL_PASSWORDS = False
    page = client.get("/accounts/login/")
    assert b"id_password" not in page.content
    assert b"Local passwords are turned off" in page.content
    answer = client.post("/accounts/login/", {"username": "fin", "password": "fin-password-123"})
    assert answer.status_code == 403
    admin = client.post(
        "/admin/login/", {"username": "fin", "password": "fin-password-123", "next": "/admin/"}
    )
    assert admin.status_code == 200  # the form again, with its error: not logged in
    assert client.get("/api/v1/teams/").status_code in (401, 403)

    settings.FINOPS_LOCAL_PASSWORDS = True
    answer = client.post("/accounts/login/", {"username": "fin", "password": "fin-password-123"})
    assert answer.status_code == 302
    assert client.get("/api/v1/teams/").status_code == 200


@pytest.mark.usefixtures("rules")
def test_refused_sign_ins_lock_nobody_else_out(
    provider: Provider, live_server: LiveServer, settings: Any
) -> None:
    """A refused SSO sign-in has no username for the login lockout (django-axes): refusals of
    one person must not lock out the next person from the same address (an office's NAT)."""
    site = live_server.url
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        sso_login(site, "sam", "sam-company-pass")
    session, landed = sso_login(site, "lee", "lee-company-pass")
    assert landed == f"{site}/", landed
    assert _teams(session, site) == ["vision"]


def _expire_id_token(session: requests.Session) -> None:
    """What time does to the signed-in session: its ID token's renewal time passes."""
    stored = SessionStore(session_key=session.cookies.get("sessionid"))
    stored["oidc_id_token_expiration"] = 0
    stored.save()


@pytest.mark.usefixtures("rules")
def test_a_signed_in_lead_is_checked_with_the_provider_again(
    provider: Provider, live_server: LiveServer, other_team: Team
) -> None:
    """Once the ID token is older than OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS, a page view goes
    back to the provider silently (prompt=none) and the rules apply again: finance moved the
    group to another team, and the lead's next page shows the new team without a new sign-in.
    Losing every rule ends the session."""
    site = live_server.url
    session, _ = sso_login(site, "lee", "lee-company-pass")
    SsoRule.objects.filter(value="ml-research-leads").update(team=other_team)
    assert session.get(f"{site}/teams/speech/", timeout=30).status_code in (403, 404)
    _expire_id_token(session)
    page = session.get(f"{site}/teams/speech/", timeout=30)
    assert page.status_code == 200
    assert any(r.url.startswith(provider.issuer) for r in page.history), page.history
    assert _teams(session, site) == ["speech"]

    SsoRule.objects.filter(value="ml-research-leads").delete()
    _expire_id_token(session)
    page = session.get(f"{site}/teams/speech/", timeout=30)
    assert page.url.startswith(f"{site}/accounts/login/"), page.url
    assert session.get(f"{site}/api/v1/teams/", timeout=30).status_code in (401, 403)


def test_sso_discover_prints_the_providers_endpoints(live_server: LiveServer) -> None:
    with oidc_provider(live_server.url) as running:
        out = StringIO()
        call_command("sso_discover", running.issuer + "/", stdout=out)
        lines = out.getvalue().splitlines()
        assert lines[:4] == [
            f"OIDC_OP_AUTHORIZATION_ENDPOINT={running.issuer}/auth",
            f"OIDC_OP_TOKEN_ENDPOINT={running.issuer}/token",
            f"OIDC_OP_USER_ENDPOINT={running.issuer}/me",
            f"OIDC_OP_JWKS_ENDPOINT={running.issuer}/jwks",
        ]
        with pytest.raises(CommandError, match="its issuer is"):
            call_command("sso_discover", running.issuer.replace("127.0.0.1", "localhost"))
    with pytest.raises(CommandError, match="openid-configuration"):
        call_command("sso_discover", running.issuer)


@pytest.mark.usefixtures("rules")
def test_sso_never_signs_into_a_superuser_account(
    provider: Provider, live_server: LiveServer
) -> None:
    User.objects.create_superuser("root", email="fiona@example.com", password="r" * 16)
    site = live_server.url
    session, landed = sso_login(site, "fiona", "fiona-company-pass")
    assert landed.startswith(f"{site}/accounts/login/"), landed
    assert session.get(f"{site}/api/v1/teams/", timeout=30).status_code in (401, 403)
    assert not Profile.objects.filter(user__username="root").exists()
