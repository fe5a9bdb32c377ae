"""Who may see what: finance (or a superuser) sees every team; a team lead only their own."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView

from finops.org.models import Profile

AnyUser = AbstractBaseUser | AnonymousUser


def user_profile(user: AnyUser) -> Profile | None:
    """The user's Profile, or None (anonymous, or a user nobody gave a role yet)."""
    if not user.is_authenticated:
        return None
    try:
        return user.finops_profile  # type: ignore[union-attr,attr-defined]
    except Profile.DoesNotExist:
        return None


# Set on the request's user by finops.tokens.authentication for a team-limited API token: the
# ids of the teams the token may see. Such a token acts as a team lead of those teams (no
# org-wide buckets, no finance-only endpoints), whatever the user's own role.
TOKEN_TEAM_LIMIT_ATTR = "finops_token_team_ids"


def token_team_limit(user: AnyUser) -> frozenset[int] | None:
    """The team ids an API token limits this request to, or None (no limit)."""
    limit: frozenset[int] | None = getattr(user, TOKEN_TEAM_LIMIT_ATTR, None)
    return limit


def user_has_finance_role(user: AnyUser) -> bool:
    """Finance by role (or superuser), ignoring any API token's team limit."""
    if not user.is_authenticated or not user.is_active:
        return False
    if getattr(user, "is_superuser", False):
        return True
    profile = user_profile(user)
    return profile is not None and profile.role == Profile.Role.FINANCE


def user_is_finance(user: AnyUser) -> bool:
    """Sees every team and the org-wide buckets: finance by role, not limited by a token."""
    return token_team_limit(user) is None and user_has_finance_role(user)


class IsFinance(BasePermission):
    """DRF permission: finance users and superusers only (reconciliation, import batches)."""

    message = "Only finance users may see this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user: Any = request.user
        return bool(user and user.is_authenticated and user_is_finance(user))
