"""Email tasks: send one outbox row; retry what did not go out."""

from __future__ import annotations

import smtplib

from celery import shared_task

from finops.notifications.channel_selectors import CHANNEL_KIND_PREFIX
from finops.notifications.enqueue import SEND_NOTIFICATION_TASK
from finops.notifications.models import EmailNotification
from finops.notifications.services import notification_send

# SMTP servers that are down, refuse a connection or answer 4xx are worth trying again later;
# a programming error is not. A chat/webhook post that failed raises WebhookDeliveryError, an
# OSError: retried the same way.
TRANSIENT_SMTP_ERRORS = (smtplib.SMTPException, OSError)


@shared_task(
    name=SEND_NOTIFICATION_TASK,
    autoretry_for=TRANSIENT_SMTP_ERRORS,
    retry_backoff=30,
    retry_backoff_max=30 * 60,
    max_retries=8,
    soft_time_limit=60,
    time_limit=90,
)
def send_notification(notification_id: int) -> bool:
    """Send the email if it is not sent yet. Idempotent: a sent row is never sent again."""
    return notification_send(notification_id=notification_id)


@shared_task(soft_time_limit=120, time_limit=180)
def resend_unsent_notifications() -> int:
    """Queue every email that is still pending or failed (after retries ran out, or a dead
    worker). Sending claims each row first, so a row already in flight is not sent twice."""
    unsent = EmailNotification.objects.exclude(status=EmailNotification.Status.SENT).exclude(
        kind__startswith=CHANNEL_KIND_PREFIX,
        channel__isnull=True,  # its channel was deleted
    )
    ids = list(unsent.values_list("pk", flat=True)[:500])
    for notification_id in ids:
        send_notification.delay(notification_id)
    return len(ids)
