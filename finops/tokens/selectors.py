"""Reads for API tokens."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from finops.tokens.models import ApiToken


def api_token_list_for_user(*, user: User) -> QuerySet[ApiToken]:
    """The user's tokens, newest first, teams prefetched (two queries)."""
    return ApiToken.objects.filter(user=user).prefetch_related("teams").order_by("-created_at")
