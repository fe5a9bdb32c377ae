"""The email outbox: one email per key, sent through a real SMTP server, marked sent after it
accepted, and retried when the server is down."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from finops.notifications.models import EmailNotification
from finops.notifications.services import notification_enqueue, notification_send
from finops.notifications.tasks import resend_unsent_notifications
from tests.conftest import CapturedMail

pytestmark = pytest.mark.django_db(transaction=True)


def _enqueue(key: str = "budget:1:2026-10:actual:80") -> EmailNotification | None:
    return notification_enqueue(
        key=key,
        kind="budget",
        recipients=["lead@example.com", "fin@example.com"],
        subject="Budget Vision monthly reached 80 %",
        text_body="Actual 1,600.00 USD of 2,000.00 USD",
        html_body="<p>Actual <b>1,600.00 USD</b></p>",
    )


def test_one_key_gives_one_email_through_smtp(smtp_server: CapturedMail) -> None:
    first = _enqueue()
    again = _enqueue()

    assert first is not None
    assert again is None
    assert EmailNotification.objects.count() == 1
    assert len(smtp_server.to("lead@example.com")) == 1
    assert len(smtp_server.to("fin@example.com")) == 1
    content = smtp_server.to("lead@example.com")[0]
    assert b"multipart/alternative" in content
    assert b"text/html" in content
    first.refresh_from_db()
    assert first.status == EmailNotification.Status.SENT
    assert first.sent_at is not None


def test_a_sent_email_is_never_sent_again(smtp_server: CapturedMail) -> None:
    notification = _enqueue()
    assert notification is not None

    assert notification_send(notification_id=notification.pk) is False
    assert resend_unsent_notifications() == 0
    assert len(smtp_server.messages) == 1


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_smtp_down_records_the_error_and_a_later_run_sends(
    settings: Any, smtp_server: CapturedMail
) -> None:
    working_port = settings.EMAIL_PORT
    settings.EMAIL_PORT = _closed_port()
    _enqueue()  # the evaluation that found it due does not fail
    notification = EmailNotification.objects.get()
    assert notification.status == EmailNotification.Status.FAILED
    assert "ConnectionRefusedError" in notification.last_error
    assert smtp_server.messages == []

    settings.EMAIL_PORT = working_port
    assert resend_unsent_notifications() == 1
    notification.refresh_from_db()
    assert notification.status == EmailNotification.Status.SENT
    assert len(smtp_server.to("lead@example.com")) == 1
