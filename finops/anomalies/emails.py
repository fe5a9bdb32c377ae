"""Who hears of an anomaly, and the emails (through the outbox: each is sent exactly once).

- Team leads of the anomaly's team, and every finance user, each get one email per anomaly
  (key `anomaly:<id>:<address>`), unless they chose the daily digest or no anomaly emails
  (NotificationPreference, which notification_enqueue also applies).
- A digest lists the anomalies created on one UTC day that its reader may see (key
  `anomaly-digest:<user id>:<day>`), sent by beat the next morning; none when there were none.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from django.template.loader import render_to_string
from django.urls import reverse

from finops.anomalies.models import Anomaly
from finops.anomalies.selectors import anomaly_rate_figures, anomaly_share_figures
from finops.notifications.models import NotificationPreference
from finops.notifications.services import notification_enqueue
from finops.org.models import Profile

KIND = NotificationPreference.KIND_ANOMALY
DIGEST_KIND = NotificationPreference.KIND_ANOMALY_DIGEST


def anomaly_url(anomaly: Anomaly) -> str:
    return settings.SITE_URL + reverse("web:anomaly", args=[anomaly.pk])


def _finance_users() -> QuerySet[User]:
    return User.objects.filter(
        Q(is_superuser=True) | Q(finops_profile__role=Profile.Role.FINANCE), is_active=True
    ).exclude(email="")


def _recipients(anomaly: Anomaly) -> list[User]:
    """Finance users, plus the leads of the anomaly's team, once each, by address."""
    users = list(_finance_users())
    if anomaly.team_id is not None:
        users += list(
            User.objects.filter(
                is_active=True,
                finops_profile__role=Profile.Role.TEAM_LEAD,
                finops_profile__teams=anomaly.team_id,
            ).exclude(email="")
        )
    unique: dict[str, User] = {}
    for user in users:
        unique.setdefault(user.email.lower(), user)
    return [unique[k] for k in sorted(unique)]


def _wants_one_by_one(user: User) -> bool:
    mode = NotificationPreference.objects.filter(user=user).values_list("anomaly_mode", flat=True)
    return mode.first() in (None, NotificationPreference.AnomalyMode.IMMEDIATE)


def subject_for(anomaly: Anomaly) -> str:
    owner = anomaly.team.name if anomaly.team else anomaly.series_key
    if anomaly.series_kind == Anomaly.Series.ENDPOINT:
        owner = f"{owner}, endpoint {anomaly.series_key}" if anomaly.team else owner
        return (
            f"[GPU FinOps] {anomaly.kind_label} for {owner}: {anomaly.impact:,.2f} "
            f"{anomaly.currency} at stake from {anomaly.first_day:%Y-%m-%d}"
        )
    return (
        f"[GPU FinOps] {anomaly.kind_label} for {owner}: +{anomaly.impact:,.2f} "
        f"{anomaly.currency} from {anomaly.first_day:%Y-%m-%d}"
    )


def anomaly_notify(*, anomaly: Anomaly) -> int:
    """Enqueue the per-anomaly emails (idempotent by key); returns how many were new."""
    # The figures in the series' unit, as the anomaly's page gives them: an endpoint's per
    # 1,000 requests, a cluster's idle share (each with its money impact labelled apart).
    context = {"anomaly": anomaly, "breakdowns": anomaly.driver_breakdowns(),
               "url": anomaly_url(anomaly), "rates": anomaly_rate_figures(anomaly=anomaly),
               "shares": anomaly_share_figures(anomaly=anomaly)}  # fmt: skip
    text = render_to_string("anomalies/email.txt", context)
    html = render_to_string("anomalies/email.html", context)
    sent = 0
    for user in _recipients(anomaly):
        if not _wants_one_by_one(user):
            continue
        created = notification_enqueue(
            key=f"anomaly:{anomaly.pk}:{user.email.lower()}",
            kind=KIND,
            recipients=[user.email],
            subject=subject_for(anomaly),
            text_body=text,
            html_body=html,
        )
        sent += created is not None
    return sent


def _visible_to(user: User, anomalies: Iterable[Anomaly]) -> list[Anomaly]:
    if user.is_superuser or Profile.objects.filter(user=user, role=Profile.Role.FINANCE).exists():
        return list(anomalies)
    teams = set(Profile.objects.filter(user=user).values_list("teams", flat=True))
    return [a for a in anomalies if a.team_id in teams]


def digests_send(*, day: dt.date) -> int:
    """Enqueue each digest subscriber's digest of the anomalies created on `day` (UTC)."""
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC)
    created = list(
        Anomaly.objects.filter(created_at__gte=start, created_at__lt=start + dt.timedelta(days=1))
        .select_related("team")
        .prefetch_related("drivers")
        .order_by("first_day", "id")
    )
    if not created:
        return 0
    sent = 0
    subscribers = User.objects.filter(
        is_active=True,
        notification_preference__anomaly_mode=NotificationPreference.AnomalyMode.DIGEST,
    ).exclude(email="")
    for user in subscribers.order_by("id"):
        mine = _visible_to(user, created)
        if not mine:
            continue
        context = {"day": day, "anomalies": [(a, anomaly_url(a)) for a in mine],
                   "site_url": settings.SITE_URL}  # fmt: skip
        notification = notification_enqueue(
            key=f"{DIGEST_KIND}:{user.pk}:{day.isoformat()}",
            kind=DIGEST_KIND,
            recipients=[user.email],
            subject=f"[GPU FinOps] {len(mine)} cost anomalies found on {day:%Y-%m-%d}",
            text_body=render_to_string("anomalies/digest.txt", context),
            html_body=render_to_string("anomalies/digest.html", context),
        )
        sent += notification is not None
    return sent
