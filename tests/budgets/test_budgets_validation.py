"""What a budget may hold, and what check_budgets says about its emails (issue 25 items 4, 5, 7):

- 4: `PATCH {"active": false}` failed on every budget ("At most 15 digits and 2 decimal places":
  the stored amount came back with 12 decimals and was checked again). A key a PATCH does not
  send keeps its stored value unchecked; an amount with trailing zeros is the same amount.
- 5: at most MAX_THRESHOLDS thresholds of THRESHOLD_MIN..THRESHOLD_MAX % each, and at most
  MAX_RECIPIENTS listed addresses, each an active user's or in
  FINOPS_BUDGET_RECIPIENT_DOMAINS (a budget sent about 1,000 emails to anyone before).
- 7: a name with a control character is refused everywhere names come in (API, form, admin);
  a stored one no longer breaks its emails' headers; check_budgets says "sent" only for an
  email the SMTP server took, and exits non-zero when one failed.
"""

from __future__ import annotations

import io
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from finops.budgets.models import Budget
from finops.budgets.validation import MAX_RECIPIENTS, MAX_THRESHOLDS, THRESHOLD_MAX
from finops.notifications.models import EmailNotification
from finops.org.models import Team
from tests.budget_data import ledger_days

pytestmark = pytest.mark.django_db
URL = "/api/v1/budgets/"
BODY = {"name": "Vision monthly", "team": "vision", "period": "month", "amount": "1950.00",
        "currency": "USD", "thresholds": [50, 80, 100], "forecast_thresholds": [100]}  # fmt: skip


@pytest.fixture
def september(team: Team) -> None:
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)


def _created(api: APIClient, **change: Any) -> dict[str, Any]:
    response = api.post(URL, {**BODY, **change}, format="json")
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


# --- 4: PATCH ---------------------------------------------------------------------------------


def test_patch_active_alone_works(finance_api: APIClient, september: None) -> None:
    created = _created(finance_api)

    response = finance_api.patch(f"{URL}{created['id']}/", {"active": False}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["active"] is False
    budget = Budget.objects.get()
    assert not budget.active
    assert budget.amount == Decimal("1950.00")
    assert finance_api.patch(f"{URL}{budget.pk}/", {"active": True}, format="json").json()["active"]
    # Any other key alone too; and what GET answers can be PUT back as it is.
    renamed = finance_api.patch(f"{URL}{budget.pk}/", {"name": "Renamed"}, format="json")
    assert renamed.status_code == 200, renamed.content
    got = finance_api.get(f"{URL}{budget.pk}/").json()
    put = finance_api.put(f"{URL}{budget.pk}/", got, format="json")
    assert put.status_code == 200, put.content
    assert Budget.objects.get().name == "Renamed"


def test_an_amount_with_trailing_zeros_is_that_amount(
    finance_api: APIClient, september: None
) -> None:
    created = _created(finance_api, amount="1950.000000000000")
    assert created["amount"] == "1950.00"
    response = finance_api.patch(f"{URL}{created['id']}/", {"amount": "12.345"}, format="json")
    assert response.json() == {"amount": ["At most 15 digits and 2 decimal places."]}


def test_patch_leaves_unsent_values_as_stored(finance_api: APIClient, september: None) -> None:
    """A budget saved before the bounds (1,000 thresholds, an outside address) can still be
    switched off; a PATCH that sends those keys must meet them."""
    budget = Budget.objects.create(
        name="Old", team=Team.objects.get(slug="vision"), amount=Decimal("100"), currency="USD",
        thresholds=list(range(1, 1001)), recipients=["someone@elsewhere.test"],
    )  # fmt: skip
    response = finance_api.patch(f"{URL}{budget.pk}/", {"active": False}, format="json")
    assert response.status_code == 200, response.content
    budget.refresh_from_db()
    assert (budget.active, len(budget.thresholds)) == (False, 1000)
    again = finance_api.patch(
        f"{URL}{budget.pk}/", {"thresholds": budget.thresholds}, format="json"
    )
    assert again.status_code == 400
    assert "At most 10 thresholds" in again.json()["thresholds"][0]


# --- 5: thresholds and recipients --------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"thresholds": list(range(1, 1001))}, "thresholds", "At most 10 thresholds (1000 given)"),
        ({"forecast_thresholds": list(range(10, 121, 10))}, "forecast_thresholds", "At most 10"),
        ({"thresholds": [50, THRESHOLD_MAX + 1]}, "thresholds", "outside 1 to 500 %"),
        ({"thresholds": [1000]}, "thresholds", "outside 1 to 500 %"),
        ({"recipients": ["cfo@competitor.test"]}, "recipients", "neither a user's address"),
        (
            {"recipients": [f"a{i}@example.com" for i in range(MAX_RECIPIENTS + 1)]},
            "recipients",
            "At most 20 addresses",
        ),
    ],
)
def test_bounded_thresholds_and_organisation_recipients(
    finance_api: APIClient,
    september: None,
    settings: Any,
    change: dict[str, Any],
    field: str,
    message: str,
) -> None:
    settings.FINOPS_BUDGET_RECIPIENT_DOMAINS = ["example.com"]
    response = finance_api.post(URL, {**BODY, **change}, format="json")
    assert response.status_code == 400, response.content
    assert message in " ".join(response.json()[field])
    assert not Budget.objects.exists()


def test_recipients_are_users_or_in_configured_domains(
    finance_api: APIClient, september: None, lead_user: User, settings: Any
) -> None:
    lead_user.email = "Lead@Corp.test"
    lead_user.save()
    inactive = User.objects.create_user("gone", email="gone@corp.test", is_active=False)
    settings.FINOPS_BUDGET_RECIPIENT_DOMAINS = []

    ok = finance_api.post(URL, {**BODY, "recipients": ["lead@corp.test"]}, format="json")
    assert ok.status_code == 201, ok.content
    refused = finance_api.post(
        URL, {**BODY, "recipients": [inactive.email, "x@example.com"]}, format="json"
    )
    assert refused.status_code == 400
    assert len(refused.json()["recipients"]) == 2

    settings.FINOPS_BUDGET_RECIPIENT_DOMAINS = ["example.com"]
    most = [f"finops{i}@example.com" for i in range(MAX_RECIPIENTS)]
    body = {**BODY, "recipients": most, "thresholds": list(range(10, 101, 10))}
    assert len(body["thresholds"]) == MAX_THRESHOLDS
    assert finance_api.post(URL, body, format="json").status_code == 201


def test_the_form_shows_the_same_bounds(finance_client: Client, september: None) -> None:
    form = {"name": "Vision", "team": "vision", "period": "month", "amount": "100",
            "currency": "USD", "thresholds": " ".join(str(t) for t in range(1, 31)),
            "forecast_thresholds": "100", "recipients": "cfo@competitor.test"}  # fmt: skip
    page = finance_client.post("/budgets/new/", form).content.decode()
    assert "At most 10 thresholds (30 given)" in page
    assert "neither a user&#x27;s address nor in an allowed domain" in page
    assert not Budget.objects.exists()


# --- 7: names, and what check_budgets reports --------------------------------------------------


@pytest.mark.parametrize(
    "name", ["Vision\nmonthly", "Vision\r\nBcc: x@evil.test", "a\tb", "\x1b[31m"]
)
def test_control_characters_in_a_name_are_refused(
    finance_api: APIClient, finance_client: Client, september: None, name: str
) -> None:
    response = finance_api.post(URL, {**BODY, "name": name}, format="json")
    assert response.status_code == 400
    assert "Control characters" in response.json()["name"][0]
    created = _created(finance_api)
    patched = finance_api.patch(f"{URL}{created['id']}/", {"name": name}, format="json")
    assert patched.status_code == 400
    form = {"name": name, "team": "vision", "period": "month", "amount": "100",
            "currency": "USD", "thresholds": "50", "forecast_thresholds": "100"}  # fmt: skip
    page = finance_client.post("/budgets/new/", form)
    assert page.status_code == 200
    assert "Control characters" in page.content.decode()
    assert Budget.objects.get().name == "Vision monthly"


def test_the_admin_keeps_the_same_rules(finance_client: Client, team: Team, settings: Any) -> None:
    settings.FINOPS_BUDGET_RECIPIENT_DOMAINS = []
    form = {"name": "Vision\nmonthly", "team": team.pk, "tag_key": "", "tag_value": "",
            "provider_name": "", "period": "month", "amount": "100", "currency": "USD",
            "thresholds": "[50]", "forecast_thresholds": "[100]",
            "recipients": '["cfo@competitor.test"]', "active": "on"}  # fmt: skip
    page = finance_client.post("/admin/budgets/budget/add/", form)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Control characters" in text
    assert "neither a user" in text
    assert not Budget.objects.exists()
    ok = finance_client.post(
        "/admin/budgets/budget/add/", {**form, "name": "Vision monthly", "recipients": "[]"}
    )
    assert ok.status_code == 302, ok.content.decode()[:3000]
    assert Budget.objects.get().name == "Vision monthly"


def _check_budgets() -> str:
    """As beat or cron runs it: autocommit, so each alert's email goes as its alert commits."""
    out = io.StringIO()
    call_command("check_budgets", "--as-of", "2025-09-30", stdout=out)
    return out.getvalue()


@pytest.fixture
def stored_newline_budget(september: None, lead_user: User, team: Team) -> Budget:
    """A budget saved before names were checked (on SQLite a newline was stored as given)."""
    lead_user.email = "lead@example.com"
    lead_user.save()
    return Budget.objects.create(
        name="Vision\nmonthly", team=team, amount=Decimal("1000"), currency="USD",
        thresholds=[100], forecast_thresholds=[],
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_stored_newline_no_longer_breaks_the_email(
    stored_newline_budget: Budget,
) -> None:
    printed = _check_budgets()

    # Its email went (the subject on one line), and only then is it reported as sent.
    [sent] = mail.outbox
    assert "\n" not in sent.subject
    assert "Vision monthly" in sent.subject
    assert EmailNotification.objects.get().status == EmailNotification.Status.SENT
    assert "  alert sent: actual 100 %" in printed
    assert "1 budget, alerts: 1 sent, 0 queued, 0 failed, 0 without recipients" in printed


@pytest.mark.django_db(transaction=True)
def test_a_failed_email_is_reported_as_failed(
    stored_newline_budget: Budget,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(self: EmailBackend, messages: Any) -> int:
        raise ValueError("the relay refused the message")

    monkeypatch.setattr(EmailBackend, "send_messages", refuse)
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 alert email"):
        call_command("check_budgets", "--as-of", "2025-09-30", stdout=out)
    printed = out.getvalue()
    assert "alert sent" not in printed
    assert "alert email FAILED: actual 100 %: ValueError: the relay refused" in printed
    assert "0 sent, 0 queued, 1 failed" in printed
    assert EmailNotification.objects.get().status == EmailNotification.Status.FAILED


@pytest.mark.django_db(transaction=True)
def test_an_alert_without_recipients_is_not_said_to_be_sent(
    september: None,
    team: Team,
) -> None:
    Budget.objects.create(name="Quiet", team=team, amount=Decimal("1000"), currency="USD",
                          thresholds=[100], forecast_thresholds=[])  # fmt: skip
    printed = _check_budgets()
    assert "alert sent" not in printed
    assert "alert raised, no email: actual 100 % (nobody to send it to)" in printed
