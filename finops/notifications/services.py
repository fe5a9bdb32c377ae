"""Writes of the email outbox: enqueue once, send once, mark sent after SMTP accepted."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, transaction
from django.utils import timezone

from finops.notifications.channel_selectors import CHANNEL_KIND_PREFIX
from finops.notifications.enqueue import notification_sending_enqueue
from finops.notifications.models import EmailNotification, NotificationPreference
from finops.notifications.selectors import addresses_not_wanting
from finops.notifications.webhooks import WebhookRefused, webhook_post
from finops.org.services import data_version_bump

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# A claim older than this belongs to a worker that died mid-send: another may take it over.
STALE_CLAIM = dt.timedelta(minutes=10)


def notification_enqueue(
    *,
    key: str,
    kind: str,
    recipients: Sequence[str],
    subject: str,
    text_body: str,
    html_body: str = "",
) -> EmailNotification | None:
    """Create the email for `key` unless it exists, and queue its sending after commit.

    Returns the new row, or None when an email with this key was enqueued before (by an earlier
    run or a concurrent worker): the unique constraint decides, not a check-then-insert. The
    addresses of users who declined emails of `kind` (NotificationPreference) are left out;
    None too when nobody is left.
    """
    # A header holds one line: a control character from a name (a newline in a budget's name
    # stored before names were checked) would fail the email at every try.
    subject = " ".join(_CONTROL.sub(" ", subject).split())
    declined = addresses_not_wanting(kind=kind, addresses=recipients)
    recipients = [a for a in recipients if a.strip() and a.strip().lower() not in declined]
    if not recipients:
        return None
    try:
        with transaction.atomic():
            notification = EmailNotification.objects.create(
                key=key,
                kind=kind,
                recipients=sorted(set(recipients)),
                subject=subject[:255],
                text_body=text_body,
                html_body=html_body,
            )
    except IntegrityError:
        return None
    transaction.on_commit(lambda: notification_sending_enqueue(notification_id=notification.pk))
    return notification


def notification_claim(*, notification_id: int) -> bool:
    """Take the right to send: a conditional UPDATE, so two workers never both send."""
    now = timezone.now()
    claimable = EmailNotification.objects.filter(pk=notification_id).exclude(
        status=EmailNotification.Status.SENT
    )
    claimable = claimable.filter(
        status__in=[EmailNotification.Status.PENDING, EmailNotification.Status.FAILED]
    ) | claimable.filter(status=EmailNotification.Status.SENDING, claimed_at__lt=now - STALE_CLAIM)
    return claimable.update(status=EmailNotification.Status.SENDING, claimed_at=now) == 1


def notification_send(*, notification_id: int) -> bool:
    """Send one claimed email. Raises the SMTP/OS error after recording it (the task retries)."""
    if not notification_claim(notification_id=notification_id):
        return False
    notification = EmailNotification.objects.select_related("channel").get(pk=notification_id)
    if notification.kind.startswith(CHANNEL_KIND_PREFIX):
        return _channel_send(notification)
    message = EmailMultiAlternatives(
        subject=notification.subject,
        body=notification.text_body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(notification.recipients),
    )
    if notification.html_body:
        message.attach_alternative(notification.html_body, "text/html")
    try:
        message.send(fail_silently=False)
    except Exception as error:
        EmailNotification.objects.filter(pk=notification_id).update(
            status=EmailNotification.Status.FAILED,
            attempts=notification.attempts + 1,
            last_error=f"{type(error).__name__}: {error}"[:2000],
        )
        data_version_bump()  # a budget alert's error shows in the budgets API
        raise
    _mark_sent(notification)
    return True


def _mark_sent(notification: EmailNotification) -> None:
    EmailNotification.objects.filter(pk=notification.pk).update(
        status=EmailNotification.Status.SENT,
        attempts=notification.attempts + 1,
        sent_at=timezone.now(),
        last_error="",
    )
    data_version_bump()  # a budget alert's sent_at shows in the budgets API


def _mark_failed(notification: EmailNotification, error: Exception) -> None:
    EmailNotification.objects.filter(pk=notification.pk).update(
        status=EmailNotification.Status.FAILED,
        attempts=notification.attempts + 1,
        last_error=f"{type(error).__name__}: {error}"[:2000],
    )


def _channel_send(notification: EmailNotification) -> bool:
    """Post a claimed chat/webhook message. A URL refused now (a private address, a deleted
    channel) is recorded and not retried by the task; a failed post is recorded and raised
    (WebhookDeliveryError, an OSError: the task retries it with backoff)."""
    channel = notification.channel
    try:
        if channel is None:
            raise WebhookRefused("The channel was deleted.")
        webhook_post(url=channel.url, payload=notification.payload)
    except WebhookRefused as error:
        _mark_failed(notification, error)
        return False
    except Exception as error:
        _mark_failed(notification, error)
        raise
    _mark_sent(notification)
    return True


def notification_preference_set(
    *, user: Any, anomaly_mode: str, budget_emails: bool
) -> NotificationPreference:
    """Store the user's choice of emails (one row per user, created on first change)."""
    if anomaly_mode not in NotificationPreference.AnomalyMode.values:
        raise ValueError(f"Unknown anomaly email mode {anomaly_mode!r}.")
    with transaction.atomic():
        preference, _ = NotificationPreference.objects.update_or_create(
            user=user, defaults={"anomaly_mode": anomaly_mode, "budget_emails": budget_emails}
        )
    return preference
