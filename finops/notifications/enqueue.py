"""Queue an email's sending by task name, so that services never import tasks.

Tasks import services (send_notification calls notification_send); notification_enqueue queues
that task after its commit and would otherwise import tasks back. Sending by the registered name
keeps the imports one-way (tasks -> services -> this module); the name is registered in every
process (NotificationsConfig.ready), so an eager Celery still sends inline.
"""

from __future__ import annotations

import logging

from finops.core.queue import task_send

logger = logging.getLogger(__name__)

SEND_NOTIFICATION_TASK = "finops.notifications.tasks.send_notification"


def notification_sending_enqueue(*, notification_id: int) -> None:
    """Hand the email to a worker. A broker that is down, or an eager run whose SMTP server is
    down, must not fail the evaluation that found the email due: the row stays unsent and the
    beat task `resend_unsent_notifications` queues it again."""
    try:
        task_send(SEND_NOTIFICATION_TASK, notification_id)
    except Exception:
        logger.warning(
            "email %s not sent now; it stays queued for a retry", notification_id, exc_info=True
        )
