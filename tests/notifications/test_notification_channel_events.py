"""Anomalies and month closes on chat/webhook channels (issue 33 item 2), to a real HTTP server:
each fact once per subscribed channel, with its figures, currency and link.

Close: tests/close_data.py's bills: September 2025, vision 100.00 USD and speech 50.00
USD (tagged line items). Anomaly: tests/anomaly_ledger.py's series (one spike of vision)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from finops.anomalies.models import Anomaly
from finops.anomalies.services import anomalies_detect
from finops.chargeback.services import period_close
from finops.notifications.models import NotificationChannel
from finops.notifications.tasks import resend_unsent_notifications
from finops.org.models import Team
from tests import anomaly_ledger as ledger
from tests.conftest import free_port
from tests.webhook_server import Hook

SEPT = dt.date(2025, 9, 1)


@pytest.fixture
def hook(settings: Settings) -> Iterator[Hook]:
    settings.FINOPS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.SITE_URL = "https://finops.example"
    hook = Hook(free_port())
    hook.start()
    yield hook
    hook.stop()


def _channel(hook: Hook, name: str, kind: str, team: Team | None, events: list[str]) -> None:
    url = f"{hook.url}/{name}"
    NotificationChannel.objects.create(name=name, kind=kind, url=url, team=team, events=events)


def _by_channel(hook: Hook) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for path, body in zip(hook.paths, hook.bodies, strict=True):
        out.setdefault(path.rsplit("/", 1)[-1], []).append(body)
    return out


@pytest.mark.django_db
def test_a_close_posts_each_teams_statement_and_one_summary_to_the_organisation(
    bills: Path,
    hook: Hook,
    team: Team,
    finance_user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    _channel(hook, "vision", "webhook", team, ["close"])
    _channel(hook, "vision-budgets", "slack", team, ["budget"])
    _channel(hook, "finance", "slack", None, ["close", "anomaly"])

    with django_capture_on_commit_callbacks(execute=True):
        close = period_close(month=SEPT, actor=finance_user)
    resend_unsent_notifications()

    posted = _by_channel(hook)
    assert sorted(posted) == ["finance", "vision"]
    (statement,) = posted["vision"]
    assert statement["event"] == "close"
    assert statement["title"] == "Chargeback statement Vision · September 2025 (closed)"
    assert statement["url"] == "https://finops.example/teams/vision/statements/2025-09/"
    assert statement["figures"][0] == {
        "label": "Total charged", "amount": "100.00", "currency": "USD", "estimate": False,
    }  # fmt: skip
    (summary,) = posted["finance"]
    lines = summary["text"].splitlines()
    assert lines[0] == "*September 2025 closed*"
    assert "• Speech: 50.00 USD" in lines
    assert "• Vision: 100.00 USD" in lines
    assert lines[-1] == "<https://finops.example/close/|Open in GPU FinOps>"
    assert close.pk is not None


@pytest.mark.django_db(transaction=True)
def test_a_new_anomaly_posts_once_to_the_channels_that_take_anomalies(
    hook: Hook, team: Team, other_team: Team
) -> None:
    _channel(hook, "vision", "teams", team, ["anomaly"])
    _channel(hook, "speech", "slack", other_team, ["anomaly"])
    _channel(hook, "finance", "webhook", None, ["anomaly"])
    _channel(hook, "finance-budgets", "webhook", None, ["budget"])

    ledger.build(team)
    anomalies_detect(since=ledger.START + dt.timedelta(days=20))
    anomalies_detect(since=ledger.START + dt.timedelta(days=20))  # a re-run posts nothing
    resend_unsent_notifications()

    anomaly = Anomaly.objects.get()
    posted = _by_channel(hook)
    assert sorted(posted) == ["finance", "vision"]
    (generic,) = posted["finance"]
    assert generic["url"] == f"https://finops.example/anomalies/{anomaly.pk}/"
    impact = str(anomaly.impact.quantize(Decimal("0.01")))
    assert generic["figures"][0] == {
        "label": "Impact", "amount": impact, "currency": anomaly.currency, "estimate": False,
    }  # fmt: skip
    (card,) = posted["vision"]
    facts = card["attachments"][0]["content"]["body"][2]["facts"]
    assert facts[0]["title"] == "Impact"
    assert facts[0]["value"].endswith(f" {anomaly.currency}")
