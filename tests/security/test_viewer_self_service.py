"""A viewer's own account (issue 25 item 12). docs/api.md says every user makes their own API
tokens; a viewer got 403 making one, or changing their email settings. Decided: the viewer
role is read-only on the organisation's data, not on the viewer's own account. A viewer makes
read-only tokens (scoped to what a viewer sees, like any token), revokes them, chooses their
emails (the page, the API, a budget's opt-out); everything else stays refused."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from finops.budgets.models import Budget, BudgetOptOut
from finops.chargeback.models import ClosedPeriod
from finops.notifications.models import NotificationPreference
from finops.org.models import Team
from finops.tokens.models import ApiToken
from finops.tokens.services import TokenError, api_token_create
from tests.factories import Scenario

pytestmark = pytest.mark.django_db


def test_a_viewer_makes_a_read_only_token_on_the_page(
    client: Client, viewer_user: User, scenario: Scenario
) -> None:
    client.force_login(viewer_user)
    page = client.get("/account/tokens/").content.decode()
    assert "Your role is read-only, and so are your tokens." in page

    # Even with the box unticked, a viewer's token is read-only.
    response = client.post("/account/tokens/", {"name": "grafana", "expires_in_days": "30"})
    assert response.status_code == 200, response.content[:500]
    token = ApiToken.objects.get(user=viewer_user)
    assert token.read_only
    key = response.context["new_key"]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    # It sees what the viewer sees (everything finance sees) and writes nothing.
    assert api.get("/api/v1/reconciliation/?month=2025-09").status_code == 200
    assert api.post("/api/v1/budgets/", {"name": "x"}, format="json").status_code == 403
    assert api.patch("/api/v1/me/notification-preferences/", {}, format="json").status_code == 403

    revoke = client.post(f"/account/tokens/{token.pk}/revoke/")
    assert revoke.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api.get("/api/v1/teams/").status_code == 401


def test_a_viewer_token_is_read_only_everywhere_it_is_made(viewer_user: User) -> None:
    with pytest.raises(TokenError, match="read-only"):
        api_token_create(user=viewer_user, name="rw")
    with pytest.raises(CommandError, match="read-only"):
        call_command("api_token", "create", "--user", "viewer", stdout=io.StringIO())
    out = io.StringIO()
    call_command("api_token", "create", "--user", "viewer", "--read-only", stdout=out)
    assert out.getvalue().startswith("fo_")
    assert ApiToken.objects.get().read_only


def test_a_viewer_chooses_their_own_emails(client: Client, viewer_user: User, team: Team) -> None:
    client.force_login(viewer_user)
    response = client.post(
        "/account/notifications/", {"anomaly_mode": "digest", "budget_emails": "on"}
    )
    assert response.status_code == 302
    preference = NotificationPreference.objects.get(user=viewer_user)
    assert (preference.anomaly_mode, preference.budget_emails) == ("digest", True)
    # Through the API with the session (CSRF as a browser sends it) too.
    api = APIClient(enforce_csrf_checks=False)
    api.force_login(viewer_user)
    changed = api.patch(
        "/api/v1/me/notification-preferences/", {"budget_emails": False}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert not NotificationPreference.objects.get(user=viewer_user).budget_emails
    # And stops one budget's emails.
    budget = Budget.objects.create(name="Vision", team=team, amount=100, currency="USD")
    assert client.post(f"/budgets/{budget.pk}/emails/", {"stop": "1"}).status_code == 302
    assert BudgetOptOut.objects.filter(budget=budget, user=viewer_user).exists()


def test_everything_else_stays_refused(
    client: Client, viewer_user: User, team: Team, scenario: Scenario
) -> None:
    client.force_login(viewer_user)
    budget = Budget.objects.create(name="Vision", team=team, amount=100, currency="USD")
    assert client.post("/budgets/new/", {"name": "x"}).status_code == 403
    assert client.post(f"/budgets/{budget.pk}/edit/", {"name": "x"}).status_code == 403
    assert client.post(f"/budgets/{budget.pk}/delete/").status_code == 403
    assert client.post("/close/2025-09/close/", {"reason": "x"}).status_code == 403
    assert client.post("/pipeline/run/", {"month": "2025-09"}).status_code == 403
    api = APIClient()
    api.force_login(viewer_user)
    assert api.post("/api/v1/budgets/", {"name": "x"}, format="json").status_code == 403
    assert api.delete(f"/api/v1/budgets/{budget.pk}/").status_code == 403
    assert Budget.objects.get().name == "Vision"
    assert not ClosedPeriod.objects.exists()
