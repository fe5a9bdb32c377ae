"""Reads of email preferences."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.functions import Lower

from finops.notifications.models import NotificationPreference


def notification_preference_get(*, user: Any) -> NotificationPreference:
    """The user's preference, or an unsaved one with the defaults."""
    found = NotificationPreference.objects.filter(user=user).first()
    return found or NotificationPreference(user=user)


def addresses_not_wanting(*, kind: str, addresses: Iterable[str]) -> set[str]:
    """The addresses (lower case) whose users all declined emails of `kind`. An address no
    user has, or that one of its users still wants, is kept."""
    wanted = {a.strip().lower() for a in addresses if a.strip()}
    if not wanted:
        return set()
    users = (
        get_user_model()
        .objects.annotate(address=Lower("email"))
        .filter(address__in=wanted)
        .select_related("notification_preference")
    )
    keeps: dict[str, bool] = {}
    for user in users:
        preference = getattr(user, "notification_preference", None)
        wants = preference.wants(kind) if preference is not None else True
        keeps[user.address] = keeps.get(user.address, False) or wants
    return {address for address, keep in keeps.items() if not keep}
