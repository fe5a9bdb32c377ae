"""Chat and webhook channels (issue 33 item 2): a budget crossing posts one message to a
Slack-style webhook (a real HTTP server on a loopback port, started here) and survives the
server being down; private and loopback URLs refused at save and at send unless
FINOPS_WEBHOOK_ALLOWED_HOSTS lists them; who may see and save which channel; the bodies.

The month: one Usage line a day of September 2025 tagged team=vision, 100.00 USD each
(tests/test_budgets_alerts.py's data). Budget 2,000.00 USD with one threshold, 50 % on actual:
reached on the 10th (10 x 100 = 1,000.00); forecast as of the 10th 1,000 + 20 days x 100 =
3,000.00 USD.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from pytest_django import Settings
from rest_framework.test import APIClient

from finops.budgets.models import Budget, BudgetAlert
from finops.notifications.channel_messages import (
    ChannelMessage,
    Figure,
    channel_body,
)
from finops.notifications.channels import channel_messages_enqueue
from finops.notifications.models import EmailNotification, NotificationChannel
from finops.notifications.services import notification_send
from finops.notifications.tasks import resend_unsent_notifications
from finops.org.models import Team
from tests.budget_data import focus_month_daily as _focus_month
from tests.budget_data import ingest_focus as _ingest
from tests.conftest import free_port
from tests.webhook_server import SECRET_PATH, Hook


@pytest.fixture
def hook(settings: Settings) -> Iterator[Hook]:
    settings.FINOPS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    hook = Hook(free_port())  # not started: the test decides when it is up
    yield hook
    hook.stop()


@pytest.fixture
def vision_budget(tmp_path: Path, team: Team) -> Budget:
    _ingest(_focus_month(tmp_path / "sep.csv", {d: "100" for d in range(1, 31)}))
    return Budget.objects.create(
        name="Vision monthly", team=team, period="month", amount=Decimal("2000.00"),
        currency="USD", thresholds=[50], forecast_thresholds=[], recipients=[],
    )  # fmt: skip


def _replay(last: int) -> None:
    for dom in range(1, last + 1):
        call_command("check_budgets", "--as-of", f"2025-09-{dom:02d}", stdout=None)


def _channel(api: APIClient, **body: Any) -> Any:
    return api.post("/api/v1/notification-channels/", body, format="json")


@pytest.mark.django_db(transaction=True)
def test_a_budget_crossing_posts_one_message_and_survives_the_webhook_being_down(
    hook: Hook, vision_budget: Budget, lead_api: APIClient, lead_client: Client, settings: Settings
) -> None:
    settings.SITE_URL = "http://finops.example.com"
    created = _channel(lead_api, name="vision-alerts", kind="slack", url=hook.url,
                       team="vision", events=["budget"])  # fmt: skip
    assert created.status_code == 201, created.content
    # The URL is a secret: answers show its host and last 4 characters only.
    assert created.json()["url"] == f"http://127.0.0.1:{hook.port}/…1234"
    # An organisation channel for anomalies only: a budget alert does not go there.
    NotificationChannel.objects.create(
        name="finance-anomalies", kind="webhook", url=hook.url, events=["anomaly"]
    )

    _replay(12)  # the server is down: the crossing on the 10th cannot be posted

    (alert,) = BudgetAlert.objects.all()
    assert (alert.kind, alert.threshold, alert.crossed_on) == ("actual", 50, date(2025, 9, 10))
    (row,) = EmailNotification.objects.filter(channel__isnull=False)
    assert row.status == EmailNotification.Status.FAILED
    assert row.attempts >= 1
    assert "ConnectionRefusedError" in row.last_error
    assert hook.bodies == []

    hook.start()
    resend_unsent_notifications()  # the beat's catch-up (every few minutes)
    _replay(12)
    resend_unsent_notifications()

    assert len(hook.bodies) == 1
    assert hook.paths == [SECRET_PATH]
    text = hook.bodies[0]["text"]
    assert text.startswith("*Budget Vision monthly: actual cost reached 50 %")
    assert "• Spent to date (amortised): 1,000.00 USD" in text
    assert "• Budget: 2,000.00 USD" in text
    assert "• Forecast at the period's end: 3,000.00 USD (estimate)" in text
    link = f"http://finops.example.com/budgets/{vision_budget.pk}/"
    assert text.endswith(f"<{link}|Open in GPU FinOps>")
    # The link works (for those who may see the budget).
    assert lead_client.get(link.removeprefix(settings.SITE_URL)).status_code == 200
    row.refresh_from_db()
    assert row.status == EmailNotification.Status.SENT
    assert row.attempts >= 2
    assert row.last_error == ""

    detail = lead_api.get(f"/api/v1/notification-channels/{created.json()['id']}/").json()
    (delivery,) = detail["deliveries"]
    assert (delivery["event"], delivery["status"]) == ("budget", "sent")
    page = lead_client.get("/channels/").content.decode()
    assert "vision-alerts" in page
    assert "Budget Vision monthly" in page


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:9/hook", "https"),
        ("https://127.0.0.1:9/hook", "loopback"),
        ("https://localhost/hook", "loopback"),
        ("https://[::1]/hook", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "private"),
        ("https://10.1.2.3/hook", "private"),
        ("https://192.168.0.10/hook", "private"),
        ("https://user:pw@hooks.example.com/x", "password"),
        ("ftp://hooks.example.com/x", "https"),
        ("not a url", "valid"),
    ],
)
def test_private_loopback_and_odd_urls_are_refused(
    finance_api: APIClient, url: str, reason: str
) -> None:
    response = _channel(finance_api, name="x", kind="webhook", url=url, events=["budget"])

    assert response.status_code == 400, response.content
    assert reason in response.json()["url"][0]
    assert NotificationChannel.objects.count() == 0


def test_an_allowed_host_is_taken_and_refused_again_at_send_once_no_longer_allowed(
    hook: Hook, finance_api: APIClient, settings: Settings, team: Team
) -> None:
    hook.start()
    url = f"https://127.0.0.1:{hook.port}{SECRET_PATH}"  # allowed: saved without a connection
    created = _channel(finance_api, name="relay", kind="webhook", url=url, team=None,
                       events=["budget", "close"])  # fmt: skip
    assert created.status_code == 201, created.content

    settings.FINOPS_WEBHOOK_ALLOWED_HOSTS = []
    message = ChannelMessage(event="budget", key="budget:test", team_id=team.pk,
                             team_slug="vision", title="t", summary="s",
                             url="http://x/")  # fmt: skip
    (row,) = channel_messages_enqueue(message=message)

    assert notification_send(notification_id=row.pk) is False
    row.refresh_from_db()
    assert row.status == EmailNotification.Status.FAILED
    assert "resolves to a private, loopback or reserved address" in row.last_error
    assert hook.bodies == []
    # The same fact again: the unique key keeps it one row per channel.
    assert channel_messages_enqueue(message=message) == []


def test_who_sees_and_saves_which_channel(
    hook: Hook,
    finance_api: APIClient,
    lead_api: APIClient,
    viewer_user: User,
    other_team: Team,
) -> None:
    body = {"name": "c", "kind": "slack", "url": hook.url, "events": ["budget"]}
    assert _channel(lead_api, **body, team=None).status_code == 403  # organisation: finance's
    foreign = _channel(lead_api, **body, team="speech")
    assert foreign.status_code == 400
    assert "speech" in foreign.json()["team"][0]
    assert _channel(lead_api, **body, team="vision").status_code == 201
    assert _channel(finance_api, **body, team="speech").status_code == 201
    assert _channel(finance_api, **body, team=None).status_code == 201
    viewer = APIClient()
    viewer.force_authenticate(viewer_user)
    assert _channel(viewer, **body, team=None).status_code == 403

    lead_sees = [
        c["team"] for c in lead_api.get("/api/v1/notification-channels/").json()["results"]
    ]
    assert lead_sees == ["vision"]
    finance_sees = finance_api.get("/api/v1/notification-channels/").json()["results"]
    assert sorted(str(c["team"]) for c in finance_sees) == ["None", "speech", "vision"]
    speech = next(c for c in finance_sees if c["team"] == "speech")
    assert lead_api.delete(f"/api/v1/notification-channels/{speech['id']}/").status_code == 404
    assert viewer.delete(f"/api/v1/notification-channels/{speech['id']}/").status_code == 403

    renamed = finance_api.patch(
        f"/api/v1/notification-channels/{speech['id']}/", {"name": "speech-alerts"}, format="json"
    )
    assert renamed.status_code == 200, renamed.content
    assert NotificationChannel.objects.get(pk=speech["id"]).url == hook.url  # kept
    bad = finance_api.patch(
        f"/api/v1/notification-channels/{speech['id']}/", {"events": ["payday"]}, format="json"
    )
    assert bad.status_code == 400


def test_message_bodies_of_each_kind_carry_figures_with_currency_and_the_link() -> None:
    message = ChannelMessage(
        event="anomaly", key="anomaly:7", team_id=1, team_slug="vision",
        title="Spike for Vision: +1,234.50 USD from 2025-09-10",
        summary="Spike for Vision <team>, 2025-09-10.", url="https://finops.example.com/a/7/",
        figures=[Figure("Impact", Decimal("1234.5"), "USD"),
                 Figure("Expected", Decimal("1000000"), "EUR", estimate=True)],
    )  # fmt: skip

    slack = channel_body(kind="slack", message=message)
    assert slack["text"].splitlines() == [
        "*Spike for Vision: +1,234.50 USD from 2025-09-10*",
        "Spike for Vision &lt;team&gt;, 2025-09-10.",
        "• Impact: 1,234.50 USD",
        "• Expected: 1,000,000.00 EUR (estimate)",
        "<https://finops.example.com/a/7/|Open in GPU FinOps>",
    ]
    teams = channel_body(kind="teams", message=message)
    card = teams["attachments"][0]["content"]
    assert teams["type"] == "message"
    assert teams["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["body"][2]["facts"][1] == {
        "title": "Expected",
        "value": "1,000,000.00 EUR (estimate)",
    }
    assert card["actions"][0]["url"] == "https://finops.example.com/a/7/"
    generic = channel_body(kind="webhook", message=message)
    assert generic["figures"] == [
        {"label": "Impact", "amount": "1234.50", "currency": "USD", "estimate": False},
        {"label": "Expected", "amount": "1000000.00", "currency": "EUR", "estimate": True},
    ]
    assert (generic["event"], generic["team"], generic["url"]) == (
        "anomaly", "vision", "https://finops.example.com/a/7/",
    )  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_a_lead_sends_a_test_message_from_the_page_and_sees_it_in_the_history(
    hook: Hook, lead_api: APIClient, lead_client: Client, viewer_user: User
) -> None:
    hook.start()
    created = _channel(lead_api, name="vision-alerts", kind="teams", url=hook.url,
                       team="vision", events=["budget", "close"])  # fmt: skip
    pk = created.json()["id"]

    response = lead_client.post(f"/channels/{pk}/test/", follow=True)

    assert "Test message queued for vision-alerts" in response.content.decode()
    (body,) = hook.bodies
    card = body["attachments"][0]["content"]
    assert card["body"][0]["text"] == "Test message from GPU FinOps to vision-alerts"
    assert card["body"][1]["text"] == "vision-alerts will receive budget, close alerts of Vision."
    (delivery,) = lead_api.get(f"/api/v1/notification-channels/{pk}/").json()["deliveries"]
    assert (delivery["event"], delivery["status"]) == ("test", "sent")
    viewer = Client()
    viewer.force_login(viewer_user)
    assert viewer.post(f"/channels/{pk}/test/").status_code == 403
    assert len(hook.bodies) == 1
