"""A user's own email settings: anomalies one by one, as a daily digest or none, and budget
alerts or none; on /account/notifications/ (login, CSRF, linked from every page, Chromium)
and /api/v1/me/notification-preferences/; and the emails (through a real SMTP server) that
follow the choice."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer
from rest_framework.test import APIClient
from selenium.webdriver.remote.webdriver import WebDriver

from finops.anomalies.emails import digests_send
from finops.anomalies.services import anomalies_detect
from finops.budgets.models import Budget
from finops.notifications.models import NotificationPreference
from finops.notifications.services import notification_enqueue
from finops.org.models import Profile, Team
from tests import anomaly_ledger as ledger
from tests.builders import focus_row, write_focus_csv
from tests.conftest import CapturedMail

URL = "/account/notifications/"
API = "/api/v1/me/notification-preferences/"
LEAD = "lead@example.com"
FIN = "fin@example.com"
Mode = NotificationPreference.AnomalyMode


@pytest.fixture
def lead(lead_user: User) -> User:
    lead_user.email = LEAD
    lead_user.save()
    return lead_user


@pytest.fixture
def finance(finance_user: User) -> User:
    finance_user.email = FIN
    finance_user.save()
    return finance_user


def _preference(user: User) -> tuple[str, bool]:
    p = NotificationPreference.objects.filter(user=user).first()
    return (p.anomaly_mode, p.budget_emails) if p else (Mode.IMMEDIATE, True)


# --- the page ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_page_needs_login_and_is_linked_from_the_nav(client: Client, lead: User) -> None:
    assert client.get(URL).status_code == 302
    client.force_login(lead)
    page = client.get("/anomalies/").content.decode()
    assert f'href="{URL}"' in page
    settings_page = client.get(URL).content.decode()
    assert LEAD in settings_page
    # The defaults: one email per anomaly, budget alerts on.
    assert re.search(r'<input[^>]*value="immediate"[^>]*checked', settings_page)
    assert re.search(r'<input[^>]*name="budget_emails"[^>]*checked', settings_page)


@pytest.mark.django_db
def test_post_without_csrf_token_is_refused(lead: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(lead)
    response = client.post(URL, {"anomaly_mode": "digest"})
    assert response.status_code == 403
    assert _preference(lead) == (Mode.IMMEDIATE, True)


@pytest.mark.django_db
def test_lead_saves_digest_and_no_budget_emails(lead: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(lead)
    client.get(URL)
    token = client.cookies["csrftoken"].value
    response = client.post(URL, {"anomaly_mode": "digest", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert _preference(lead) == (Mode.DIGEST, False)  # an unticked box: no budget emails
    page = client.get(URL).content.decode()
    assert "Your email settings are saved." in page

    bad = client.post(URL, {"anomaly_mode": "hourly", "csrfmiddlewaretoken": token})
    assert bad.status_code == 200
    assert _preference(lead) == (Mode.DIGEST, False)


@pytest.mark.django_db
def test_viewer_changes_their_own_email_settings(client: Client, viewer_user: User) -> None:
    # Issue 25 item 12: the viewer role is read-only on the organisation's data; a viewer's
    # own email settings are theirs to choose (this was a 403).
    client.force_login(viewer_user)
    assert "receives no budget or anomaly emails" in client.get(URL).content.decode()
    response = client.post(URL, {"anomaly_mode": "off"})
    assert response.status_code == 302
    assert _preference(viewer_user) == (Mode.OFF, False)


# --- the API ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_api_reads_and_changes_only_the_callers_own(lead: User, finance: User) -> None:
    assert APIClient().get(API).status_code == 401
    api = APIClient()
    api.force_authenticate(lead)
    assert api.get(API).json() == {"anomaly_mode": "immediate", "budget_emails": True,
                                   "email": LEAD}  # fmt: skip
    changed = api.patch(API, {"budget_emails": False}, format="json")
    assert changed.status_code == 200
    assert changed.json()["anomaly_mode"] == "immediate"
    assert not changed.json()["budget_emails"]
    put = api.put(API, {"anomaly_mode": "off", "budget_emails": True}, format="json")
    assert put.status_code == 200
    assert _preference(lead) == (Mode.OFF, True)
    assert api.patch(API, {"anomaly_mode": "weekly"}, format="json").status_code == 400
    # Finance's own settings are untouched by the lead's changes.
    assert _preference(finance) == (Mode.IMMEDIATE, True)


@pytest.mark.django_db
def test_api_viewer_changes_their_own(viewer_user: User) -> None:
    api = APIClient()
    api.force_authenticate(viewer_user)
    assert api.get(API).status_code == 200
    assert api.patch(API, {"anomaly_mode": "off"}, format="json").status_code == 200
    assert _preference(viewer_user) == (Mode.OFF, True)


# --- the emails follow the choice -------------------------------------------------------------


@pytest.fixture
def anomaly_people(team: Team, lead: User, finance: User, settings: Settings) -> tuple[User, User]:
    settings.SITE_URL = "https://finops.example"
    return lead, finance


@pytest.mark.django_db(transaction=True)
def test_anomaly_emails_follow_each_users_choice(
    team: Team, anomaly_people: tuple[User, User], smtp_server: CapturedMail
) -> None:
    lead, finance = anomaly_people
    NotificationPreference.objects.create(user=lead, anomaly_mode=Mode.OFF)
    NotificationPreference.objects.create(user=finance, anomaly_mode=Mode.DIGEST)
    ledger.build(team)
    anomalies_detect(since=ledger.START + dt.timedelta(days=20))

    assert smtp_server.to(LEAD) == []
    assert smtp_server.to(FIN) == []
    assert digests_send(day=timezone.now().date()) == 1  # finance's digest; the lead's none
    assert smtp_server.to(LEAD) == []
    assert len(smtp_server.to(FIN)) == 1


@pytest.mark.django_db(transaction=True)
def test_the_outbox_leaves_out_whoever_declined_the_kind(
    lead: User, finance: User, smtp_server: CapturedMail
) -> None:
    NotificationPreference.objects.create(user=lead, budget_emails=False)
    listed = "someone@example.com"  # no user has it: kept
    sent = notification_enqueue(
        key="budget:test", kind="budget", recipients=[LEAD.upper(), FIN, listed],
        subject="Budget", text_body="80 %",
    )  # fmt: skip
    assert sent is not None
    assert sent.recipients == [FIN, listed]
    assert smtp_server.to(LEAD) == []
    assert len(smtp_server.to(FIN)) == 1
    # Nobody left: no email at all.
    assert notification_enqueue(key="budget:two", kind="budget", recipients=[LEAD],
                                subject="Budget", text_body="x") is None  # fmt: skip


def _september(tmp_path: Path) -> Path:
    rows = []
    for i in range(30):
        day = dt.date(2025, 9, 1) + dt.timedelta(days=i)
        rows.append(focus_row(
            BillingPeriodStart="2025-09-01T00:00:00Z", BillingPeriodEnd="2025-10-01T00:00:00Z",
            ChargePeriodStart=f"{day}T00:00:00Z",
            ChargePeriodEnd=f"{day + dt.timedelta(days=1)}T00:00:00Z",
            ServiceName="Amazon SageMaker", ResourceName="", EffectiveCost="100",
            BilledCost="100", ListCost="100",
        ))  # fmt: skip
    return write_focus_csv(tmp_path / "sep.csv", rows)


@pytest.mark.django_db(transaction=True)
def test_a_lead_who_declined_budget_emails_gets_no_budget_alert(
    team: Team, lead: User, tmp_path: Path, smtp_server: CapturedMail
) -> None:
    other = User.objects.create_user("lead2", email="lead2@example.com", password="x-12345678")
    Profile.objects.create(user=other, role=Profile.Role.TEAM_LEAD).teams.add(team)
    NotificationPreference.objects.create(user=lead, budget_emails=False)
    call_command("ingest_billing", "--format", "focus", str(_september(tmp_path)),
                 stdout=io.StringIO())  # fmt: skip
    Budget.objects.create(name="Vision", team=team, period="month", amount=2000,
                          currency="USD", thresholds=[50], forecast_thresholds=[])  # fmt: skip
    # 100 a day against 2,000: 50 % is reached on 10 September.
    call_command("check_budgets", "--as-of", "2025-09-10", stdout=io.StringIO())

    assert len(smtp_server.to("lead2@example.com")) == 1
    assert smtp_server.to(LEAD) == []


# --- Chromium ---------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_browser_lead_chooses_the_digest(
    browser: WebDriver, live_server: LiveServer, lead: User
) -> None:
    from selenium.webdriver.common.by import By

    from tests.chromium import _login, _wait_for_text

    driver = browser
    _login(driver, live_server.url, "lead", "lead-password-123")
    driver.find_element(By.LINK_TEXT, "Email settings").click()
    _wait_for_text(driver, "Email settings")
    driver.find_element(By.CSS_SELECTOR, 'input[name="anomaly_mode"][value="digest"]').click()
    box = driver.find_element(By.ID, "id_budget_emails")
    assert box.is_selected()  # the default: budget alerts are emailed
    box.click()
    driver.find_element(By.CSS_SELECTOR, '[data-testid="save"]').click()
    _wait_for_text(driver, "Your email settings are saved.")
    assert _preference(lead) == (Mode.DIGEST, False)
    # The page shows what is stored.
    assert driver.find_element(
        By.CSS_SELECTOR, 'input[name="anomaly_mode"][value="digest"]'
    ).is_selected()
    assert not driver.find_element(By.ID, "id_budget_emails").is_selected()
