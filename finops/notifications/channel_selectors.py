"""Reads of chat and webhook channels: which a user may see and change, their deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db.models import Q, QuerySet

from finops.notifications.models import EmailNotification, NotificationChannel
from finops.org.models import Team
from finops.org.permissions import AnyUser, user_is_finance, user_may_edit
from finops.org.selectors import team_list_visible

CHANNEL_KIND_PREFIX = "channel-"


def channel_list_visible(*, user: AnyUser) -> QuerySet[NotificationChannel]:
    """Every channel for finance (and viewers); a lead's teams' channels (not the
    organisation's)."""
    channels = NotificationChannel.objects.select_related("team")
    if user_is_finance(user):
        return channels
    return channels.filter(team__in=team_list_visible(user=user))


def channel_may_manage(*, user: AnyUser, team: Team | None) -> bool:
    """Finance adds and changes any channel, the organisation's too; a lead their teams'."""
    if user_may_edit(user):
        return True
    if team is None or not user.is_authenticated:
        return False
    return team_list_visible(user=user).filter(pk=team.pk).exists()


def channels_for_event(
    *, event: str, team_id: int | None, organisation_too: bool = True
) -> list[NotificationChannel]:
    """The channels a fact about `team_id` (None: the organisation) goes to: that team's
    channels and (unless `organisation_too` is false) the organisation's, that subscribe to
    `event`."""
    scope = Q(team__isnull=True) if organisation_too or team_id is None else Q(pk__in=[])
    if team_id is not None:
        scope |= Q(team_id=team_id)
    channels = NotificationChannel.objects.filter(scope).order_by("id")
    return [c for c in channels if event in c.events]


def url_masked(url: str) -> str:
    """The URL without its secret: scheme, host and the path's last 4 characters
    ("https://hooks.slack.com/…Xy3z")."""
    parts = urlsplit(url)
    tail = (parts.path + (f"?{parts.query}" if parts.query else ""))[-4:]
    return f"{parts.scheme}://{parts.netloc}/…{tail}" if len(parts.path) > 5 else url


@dataclass(frozen=True, slots=True)
class Delivery:
    id: int
    channel_id: int | None
    channel: str
    event: str
    title: str
    status: str
    attempts: int
    created_at: datetime
    sent_at: datetime | None
    last_error: str


def channel_deliveries(
    *, channels: QuerySet[NotificationChannel], limit: int = 50, deleted_too: bool = False
) -> list[Delivery]:
    """The newest messages of `channels` in the outbox, sent or not, with their errors (and
    with `deleted_too`, finance's, those of deleted channels)."""
    scope = Q(channel__in=channels)
    if deleted_too:
        scope |= Q(channel__isnull=True, kind__startswith=CHANNEL_KIND_PREFIX)
    rows = (
        EmailNotification.objects.filter(scope)
        .select_related("channel")
        .order_by("-created_at", "-id")[:limit]
    )
    return [
        Delivery(
            id=row.pk,
            channel_id=row.channel_id,
            channel=row.channel.name if row.channel else "",
            event=row.kind.removeprefix(CHANNEL_KIND_PREFIX),
            title=row.subject,
            status=row.status,
            attempts=row.attempts,
            created_at=row.created_at,
            sent_at=row.sent_at,
            last_error=row.last_error,
        )
        for row in rows
    ]
