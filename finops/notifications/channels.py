"""Writes of chat and webhook channels, and the enqueueing of their messages in the outbox.

A channel is checked when saved (its name, kind, events, who may save it for which team, and
that its URL may be posted to: finops.notifications.webhooks) and its URL again at every send.
A message is one outbox row per channel and fact (key `channel:<id>:<fact key>`), so a fact
re-evaluated, or evaluated by two workers at once, posts once; the send, its retries with
backoff and its history are the email's (finops.notifications.services / tasks).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.urls import reverse

from finops.audit.services import audit_record
from finops.notifications.channel_messages import ChannelMessage, channel_body
from finops.notifications.channel_selectors import (
    CHANNEL_KIND_PREFIX,
    channel_may_manage,
    channels_for_event,
    url_masked,
)
from finops.notifications.enqueue import notification_sending_enqueue
from finops.notifications.models import EmailNotification, NotificationChannel
from finops.notifications.webhooks import WebhookDeliveryError, WebhookRefused, webhook_target
from finops.org.models import Team
from finops.org.permissions import AnyUser
from finops.org.selectors import team_list_visible
from finops.text import text_problem

NAME_MAX = 200
URL_MAX = 2000


@dataclass(frozen=True, slots=True)
class ChannelData:
    name: str
    kind: str
    url: str
    team: str | None  # slug; None: the organisation's
    events: Sequence[str]


def _team(user: AnyUser, slug: str | None) -> Team | None:
    if slug is None:
        return None
    team = team_list_visible(user=user).filter(slug=slug).first()
    if team is None:
        raise ValidationError({"team": [f"No team {slug!r} among yours."]})
    return team


def channel_url_check(url: str) -> None:
    """ValidationError naming what is wrong with the URL (format, https, private address)."""
    if len(url) > URL_MAX:
        raise ValidationError({"url": [f"At most {URL_MAX} characters."]})
    try:
        URLValidator(schemes=["http", "https"])(url)
        webhook_target(url)
    except ValidationError as error:
        raise ValidationError({"url": ["Enter a valid https:// URL."]}) from error
    except (WebhookRefused, WebhookDeliveryError) as error:
        raise ValidationError({"url": [str(error)]}) from error


def _validate(user: AnyUser, data: ChannelData) -> Team | None:
    errors: dict[str, list[str]] = {}
    problem = text_problem(data.name)
    if not data.name.strip() or problem is not None:
        errors["name"] = [problem or "A channel needs a name."]
    elif len(data.name.strip()) > NAME_MAX:
        errors["name"] = [f"At most {NAME_MAX} characters."]
    if data.kind not in NotificationChannel.Kind.values:
        errors["kind"] = [f"One of {', '.join(NotificationChannel.Kind.values)}."]
    unknown = sorted(set(data.events) - set(NotificationChannel.Event.values))
    if unknown or not data.events:
        errors["events"] = [
            f"One or more of {', '.join(NotificationChannel.Event.values)}"
            + (f" (not {', '.join(unknown)})." if unknown else ".")
        ]
    if errors:
        raise ValidationError(errors)
    team = _team(user, data.team)
    if not channel_may_manage(user=user, team=team):
        raise PermissionDenied(
            "Only finance adds channels for the organisation; a lead for their teams."
        )
    channel_url_check(data.url)
    return team


def _events(events: Sequence[str]) -> list[str]:
    return [e for e in NotificationChannel.Event.values if e in set(events)]


def channel_create(*, user: AnyUser, data: ChannelData) -> NotificationChannel:
    team = _validate(user, data)
    with transaction.atomic():
        channel = NotificationChannel.objects.create(
            name=data.name.strip(),
            kind=data.kind,
            url=data.url,
            team=team,
            events=_events(data.events),
            created_by=user if isinstance(user, User) else None,
        )
        audit_record(actor=user, action="channel.create", obj_repr=str(channel),
                     details=_audit_details(channel))  # fmt: skip
    return channel


def channel_update(
    *, user: AnyUser, channel: NotificationChannel, data: ChannelData
) -> NotificationChannel:
    if not channel_may_manage(user=user, team=channel.team):
        raise PermissionDenied("You may not change this channel.")
    team = _validate(user, data)
    with transaction.atomic():
        channel.name, channel.kind, channel.url = data.name.strip(), data.kind, data.url
        channel.team, channel.events = team, _events(data.events)
        channel.save()
        audit_record(actor=user, action="channel.update", obj_repr=str(channel),
                     details=_audit_details(channel))  # fmt: skip
    return channel


def channel_delete(*, user: AnyUser, channel: NotificationChannel) -> None:
    """Delete the channel; its messages not sent yet are dropped (marked failed), the history
    stays."""
    if not channel_may_manage(user=user, team=channel.team):
        raise PermissionDenied("You may not delete this channel.")
    with transaction.atomic():
        EmailNotification.objects.filter(channel=channel).exclude(
            status=EmailNotification.Status.SENT
        ).update(status=EmailNotification.Status.FAILED, last_error="The channel was deleted.")
        audit_record(actor=user, action="channel.delete", obj_repr=str(channel),
                     details=_audit_details(channel))  # fmt: skip
        channel.delete()


def _audit_details(channel: NotificationChannel) -> dict[str, object]:
    return {
        "id": channel.pk,
        "kind": channel.kind,
        "url": url_masked(channel.url),
        "team": channel.team.slug if channel.team else None,
        "events": channel.events,
    }


def _key(channel: NotificationChannel, message: ChannelMessage) -> str:
    key = f"channel:{channel.pk}:{message.key}"
    if len(key) <= 255:
        return key
    return f"channel:{channel.pk}:sha256:{hashlib.sha256(message.key.encode()).hexdigest()}"


def _enqueue(channel: NotificationChannel, message: ChannelMessage) -> EmailNotification | None:
    """The outbox row of `message` for `channel`, sent after commit; None when the channel
    already has this fact (the unique key decides)."""
    try:
        with transaction.atomic():
            row = EmailNotification.objects.create(
                key=_key(channel, message),
                kind=f"{CHANNEL_KIND_PREFIX}{message.event}",
                recipients=[],
                subject=" ".join(message.title.split())[:255],
                text_body=f"{message.summary}\n{message.url}",
                channel=channel,
                payload=channel_body(kind=channel.kind, message=message),
            )
    except IntegrityError:
        return None
    transaction.on_commit(lambda: notification_sending_enqueue(notification_id=row.pk))
    return row


def channel_messages_enqueue(*, message: ChannelMessage) -> list[EmailNotification]:
    """One outbox row per channel that takes `message` (the team's and the organisation's
    channels subscribed to its event), each sent after commit; a channel that already has
    the fact is skipped. Returns the new rows."""
    channels = channels_for_event(
        event=message.event, team_id=message.team_id, organisation_too=message.organisation_too
    )
    rows = [_enqueue(channel, message) for channel in channels]
    return [row for row in rows if row is not None]


def channel_test_send(*, user: AnyUser, channel: NotificationChannel) -> EmailNotification:
    """A test message to `channel` through the outbox (its result shows in the history), from
    one who may change the channel."""
    if not channel_may_manage(user=user, team=channel.team):
        raise PermissionDenied("You may not use this channel.")
    owner = channel.team.name if channel.team else "the organisation"
    message = ChannelMessage(
        event="test",
        key=f"test:{uuid.uuid4()}",
        team_id=channel.team_id,
        team_slug=channel.team.slug if channel.team else None,
        title=f"Test message from GPU FinOps to {channel.name}",
        summary=f"{channel.name} will receive {', '.join(channel.events)} alerts of {owner}.",
        url=settings.SITE_URL + reverse("channels:list"),
    )
    row = _enqueue(channel, message)
    assert row is not None  # a new key
    return row
