"""`Authorization: Token fo_...`: the per-user API tokens of finops.tokens.

First in DEFAULT_AUTHENTICATION_CLASSES so that an unauthenticated request gets 401 with
`WWW-Authenticate: Token` (DRF takes that header from the first class only). Keys without the
`fo_` prefix are left to DRF's own TokenAuthentication, kept after this class for keys made in
the admin before these tokens existed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request

from finops.tokens.models import KEY_PREFIX, ApiToken, key_hash

KEYWORD = "Token"


class ApiTokenAuthentication(BaseAuthentication):
    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header.")
        try:
            key = parts[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid token header.") from exc
        if not key.startswith(KEY_PREFIX):
            return None  # a DRF authtoken key: the next class decides
        return self._authenticate_key(request, key)

    def _authenticate_key(self, request: Request, key: str) -> tuple[Any, ApiToken]:
        # Imported here: DRF loads this class while rest_framework.views is being imported,
        # and finops.org.permissions (imported by the services too) imports that module.
        from finops.org.permissions import TOKEN_TEAM_LIMIT_ATTR
        from finops.org.selectors import REQUEST_DATA_VERSION_ATTR, data_version_expression
        from finops.tokens.services import api_token_mark_used

        # One query for most requests: the user and profile joined (the role decides every
        # request's scope), whether the token is limited to teams (their ids only then), and
        # the data version a cached answer is keyed by (finops.api.cache).
        limited = ApiToken.teams.through.objects.filter(apitoken_id=OuterRef("pk"))
        token = (
            ApiToken.objects.select_related("user", "user__finops_profile")
            .annotate(limited=Exists(limited), data_version=data_version_expression())
            .filter(key_hash=key_hash(key))
            .first()
        )
        now = timezone.now()
        # One message for unknown, revoked and expired: a caller learns nothing about which.
        if token is None or not token.is_active_at(now) or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid, revoked or expired token.")
        if token.read_only and request.method not in SAFE_METHODS:
            raise exceptions.PermissionDenied("This token is read-only.")
        api_token_mark_used(token=token, now=now)
        setattr(request, REQUEST_DATA_VERSION_ATTR, token.data_version)  # type: ignore[attr-defined]
        user = token.user
        limit = token.limited  # type: ignore[attr-defined]
        team_ids = frozenset(token.teams.values_list("pk", flat=True)) if limit else frozenset()
        if team_ids:
            setattr(user, TOKEN_TEAM_LIMIT_ATTR, team_ids)
        return user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'
