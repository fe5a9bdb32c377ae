"""Writes for API tokens: create (returns the key, the only time it exists in clear), revoke,
and the throttled "last used" stamp."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from finops.org.permissions import user_is_viewer
from finops.org.selectors import team_list_visible
from finops.text import text_problem
from finops.tokens.models import KEY_PREFIX, ApiToken, key_hash

# Shown beside the name: enough to tell tokens apart, far too little to guess the rest.
DISPLAY_PREFIX_LENGTH = 10
# Writing last_used_at on every request would turn each dashboard read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)
MAX_EXPIRY_DAYS = 3650
NAME_MAX = 100  # ApiToken.name


class TokenError(ValueError):
    """A token request that cannot be honoured (a team outside the user's, a bad expiry)."""


@dataclass(frozen=True)
class CreatedToken:
    token: ApiToken
    key: str


def api_token_create(
    *,
    user: User,
    name: str,
    read_only: bool = False,
    team_slugs: Iterable[str] = (),
    expires_in_days: int | None = None,
) -> CreatedToken:
    """A new token for `user`. The teams must be among those the user may see; a viewer's
    tokens are read-only, as the viewer is."""
    problem = text_problem(name)
    if problem is not None:
        raise TokenError(f"Name: {problem}")
    name = name.strip()
    if not name:
        raise TokenError("A token needs a name.")
    if len(name) > NAME_MAX:
        raise TokenError(f"A token's name has at most {NAME_MAX} characters.")
    if user_is_viewer(user) and not read_only:
        raise TokenError("Your role is read-only, so are your tokens: make it read-only.")
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_EXPIRY_DAYS:
        raise TokenError(f"Expiry must be 1 to {MAX_EXPIRY_DAYS} days.")
    slugs = sorted(set(team_slugs))
    if any(text_problem(slug) is not None for slug in slugs):
        raise TokenError("A team slug holds a control character.")
    teams = list(team_list_visible(user=user).filter(slug__in=slugs))
    unknown = sorted(set(slugs) - {t.slug for t in teams})
    if unknown:
        raise TokenError(f"Not among the user's teams: {', '.join(unknown)}.")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    expires_at = (
        timezone.now() + timedelta(days=expires_in_days) if expires_in_days is not None else None
    )
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=key[:DISPLAY_PREFIX_LENGTH],
            key_hash=key_hash(key),
            read_only=read_only,
            expires_at=expires_at,
        )
        token.teams.set(teams)
    return CreatedToken(token=token, key=key)


def api_token_revoke(*, token_id: int, user: User | None = None) -> ApiToken:
    """Revoke a token (of `user`, when given: a page may only revoke its user's own).
    Revoking twice keeps the first time. ApiToken.DoesNotExist when there is no such token."""
    with transaction.atomic():
        tokens = ApiToken.objects.select_for_update()
        if user is not None:
            tokens = tokens.filter(user=user)
        token = tokens.get(pk=token_id)
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
    return token


def api_token_mark_used(*, token: ApiToken, now: datetime) -> None:
    """Stamp last_used_at, at most once per LAST_USED_RESOLUTION (one UPDATE, no lock)."""
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
