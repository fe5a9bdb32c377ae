"""SMTP down when an email is due, on PostgreSQL with a real worker (issue 9, item 2).

A worker whose EMAIL_URL points at a closed port evaluates a budget that crossed its threshold:
the alert email is recorded as failed with the SMTP error and never marked sent. That worker
stops; the next one points at a real SMTP server (aiosmtpd); the beat task
`resend_unsent_notifications` sends the email, exactly once, however often it or the send task
runs again afterwards.
"""

from __future__ import annotations

import email
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from finops.budgets.models import Budget, BudgetAlert
from finops.budgets.tasks import evaluate_budgets_for_month
from finops.celery import app as celery_app
from finops.notifications.models import EmailNotification
from finops.notifications.tasks import resend_unsent_notifications, send_notification
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.conftest import CapturedMail, free_port, worker_start, worker_stop

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

RECIPIENT = "lead@example.com"


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    return free_port()


@pytest.fixture
def worker_env(closed_port: int) -> dict[str, str]:
    # The first worker (celery_worker_process) reads this EMAIL_URL when it starts: SMTP down.
    return {"EMAIL_URL": f"smtp://127.0.0.1:{closed_port}"}


@pytest.fixture
def worker_with_smtp(
    tmp_path: Path, smtp_server: CapturedMail, settings: Any
) -> Iterator[Callable[[], None]]:
    """Start a worker whose EMAIL_URL points at the aiosmtpd server; stopped at the end."""
    started: list[Any] = []

    def start() -> None:
        env = {"EMAIL_URL": f"smtp://127.0.0.1:{settings.EMAIL_PORT}"}
        started.append(worker_start(env, tmp_path / "worker-smtp-up.log"))

    yield start
    for worker in started:
        worker_stop(worker)


def _wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _stop_running_workers() -> None:
    """Warm shutdown of the SMTP-down worker: a retry it holds goes back to the queue."""
    celery_app.control.shutdown()
    _wait_for(lambda: not celery_app.control.ping(timeout=0.5), 60, "the worker to stop")


def test_email_due_while_smtp_is_down_fails_then_is_sent_once(
    team: Team,
    smtp_server: CapturedMail,
    celery_worker_process: Path,
    worker_with_smtp: Callable[[], None],
) -> None:
    # 30 days x 100 = 3,000 USD against a 2,000 USD budget: the 100 % threshold is crossed
    # (one alert, one email; no forecast thresholds).
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)
    budget = Budget.objects.create(
        name="Vision September",
        team=team,
        period="month",
        amount=2000,
        currency="USD",
        thresholds=[100],
        forecast_thresholds=[],
        recipients=[RECIPIENT],
    )

    result = evaluate_budgets_for_month.delay("2025-09").get(timeout=120)
    assert result["alerts"] == [{"budget": budget.pk, "kind": "actual", "threshold": 100}]
    alert = BudgetAlert.objects.get(budget=budget)
    assert alert.notification is not None
    notification_id = alert.notification.pk

    def failed_with_error() -> bool:
        row = EmailNotification.objects.get(pk=notification_id)
        return row.status == EmailNotification.Status.FAILED and row.last_error != ""

    _wait_for(failed_with_error, 60, "the send attempt against the closed port to fail")
    failed = EmailNotification.objects.get(pk=notification_id)
    assert "ConnectionRefusedError" in failed.last_error, failed.last_error
    assert failed.attempts >= 1
    assert failed.sent_at is None
    assert smtp_server.messages == []

    # SMTP comes back: the down worker leaves, one pointing at the live server takes over.
    _stop_running_workers()
    assert EmailNotification.objects.get(pk=notification_id).status != "sent"
    worker_with_smtp()

    # The beat task finds the unsent email and queues it (a retry the first worker held may
    # be redelivered too: the claim lets only one of them send).
    resend_unsent_notifications.delay().get(timeout=60)
    _wait_for(
        lambda: EmailNotification.objects.get(pk=notification_id).status == "sent",
        60,
        "the email to be sent",
    )
    sent = EmailNotification.objects.get(pk=notification_id)
    assert sent.sent_at is not None
    assert sent.last_error == ""

    # Later runs of the beat task and a late send of the same row send nothing again.
    assert resend_unsent_notifications.delay().get(timeout=60) == 0
    assert send_notification.delay(notification_id).get(timeout=60) is False
    (raw,) = smtp_server.to(RECIPIENT)
    assert len(smtp_server.messages) == 1
    assert "Vision September" in str(email.message_from_bytes(raw)["Subject"])
    assert EmailNotification.objects.count() == 1
