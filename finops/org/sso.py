"""Single sign-on through the company's OpenID Connect provider (mozilla-django-oidc).

The provider's claims decide the role at every sign-in, by the SsoRule rows finance edits: a
person whose claims match no rule is refused, and a role or team taken away in the provider is
taken away here at the next sign-in. Users are matched by their verified email address; one met
for the first time is created with no usable password.

`FINOPS_LOCAL_PASSWORDS=0` turns local passwords off (LocalPasswordBackend): then only SSO and
API tokens let anyone in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from mozilla_django_oidc import middleware as mozilla_middleware
from mozilla_django_oidc import views as mozilla_views
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from finops.org.selectors import SsoGrant, sso_grant_for_claims
from finops.org.services import sso_profile_apply

logger = logging.getLogger(__name__)


def sso_enabled() -> bool:
    """Configured: the provider's endpoints and this site's client id are set."""
    return bool(settings.OIDC_OP_AUTHORIZATION_ENDPOINT and settings.OIDC_RP_CLIENT_ID)


def lockout_exempt(request: HttpRequest | None, credentials: Mapping[str, Any] | None) -> bool:
    """AXES_WHITELIST_CALLABLE: the provider's callback is no password guess (the provider
    checked the password; the code is single-use and bound to this browser's state and PKCE
    verifier), and it carries no username, so counting a refused sign-in would lock out every
    SSO user behind the same address. Password logins are counted as before."""
    if request is None or (credentials or {}).get("username"):
        return False
    return bool(request.path == reverse("oidc_authentication_callback"))


class LocalPasswordBackend(ModelBackend):
    """Django's username + password login, unless FINOPS_LOCAL_PASSWORDS is off. Permissions
    (the admin's checks) stay Django's either way."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        if not settings.FINOPS_LOCAL_PASSWORDS:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    async def aauthenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        if not settings.FINOPS_LOCAL_PASSWORDS:
            return None
        return await super().aauthenticate(request, username=username, password=password, **kwargs)


class FinopsOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's code flow, with our user matching and role rules."""

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if not sso_enabled():
            return None
        return super().authenticate(request, **kwargs)

    def verify_claims(self, claims: Mapping[str, Any]) -> bool:
        email = claims.get("email")
        if not isinstance(email, str) or "@" not in email:
            return self._refuse("the provider sent no email address")
        if claims.get("email_verified") is False:
            return self._refuse(f"the provider has not verified {email}")
        if sso_grant_for_claims(claims) is None:
            return self._refuse(f"no sign-in rule gives {email} a role here")
        # A superuser is a local break-glass account: its powers pass every rule, so whoever
        # holds its address at the provider must not get them.
        if User.objects.filter(email__iexact=email, is_superuser=True).exists():
            return self._refuse(f"{email} is a local administrator account")
        return True

    def _refuse(self, reason: str) -> bool:
        logger.warning("SSO sign-in refused: %s", reason)
        request = getattr(self, "request", None)
        if request is not None:
            messages.error(request, f"Single sign-on refused: {reason}. Ask finance for access.")
        return False

    def filter_users_by_claims(self, claims: Mapping[str, Any]) -> QuerySet[Any]:
        return User.objects.filter(email__iexact=str(claims["email"]))

    def create_user(self, claims: Mapping[str, Any]) -> User:
        user = User.objects.create_user(
            _free_username(claims),
            email=str(claims["email"]),
            first_name=str(claims.get("given_name") or claims.get("name") or "")[:150],
            last_name=str(claims.get("family_name") or "")[:150],
        )
        user.set_unusable_password()
        user.save(update_fields=["password"])
        return self.update_user(user, claims)

    def update_user(self, user: User, claims: Mapping[str, Any]) -> User:
        grant = sso_grant_for_claims(claims)
        assert grant is not None, "verify_claims refused claims with no rule"
        sso_profile_apply(user=user, grant=grant)
        return user


def _free_username(claims: Mapping[str, Any]) -> str:
    """preferred_username, else the email, made unique with a number."""
    base = str(claims.get("preferred_username") or claims["email"])[:140]
    users = User.objects
    name, n = base, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


__all__ = ["FinopsOIDCBackend", "LocalPasswordBackend", "SsoGrant", "sso_enabled"]


class _Setting:
    """A mozilla-django-oidc setting read when used, not when the middleware is built (it keeps
    what __init__ read for the process's life: a changed setting, as in tests, went unseen)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return getattr(settings, self.name)

    def __set__(self, instance: object, value: Any) -> None:
        """Ignored: the base class's __init__ assigns; the value is always read live."""


class SessionRefresh(mozilla_middleware.SessionRefresh):
    """mozilla-django-oidc's silent re-check with the provider (prompt=none) once the ID token
    is older than OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS; the callback then applies the sign-in
    rules again (or ends the session when none matches any more). Nothing without SSO."""

    OIDC_OP_AUTHORIZATION_ENDPOINT = _Setting()
    OIDC_RP_CLIENT_ID = _Setting()
    OIDC_RP_SCOPES = _Setting()

    def is_refreshable_url(self, request: HttpRequest) -> bool:
        return sso_enabled() and bool(super().is_refreshable_url(request))


class CallbackView(mozilla_views.OIDCAuthenticationCallbackView):
    """The provider's return. A refused sign-in also ends the session it was refreshing (a
    person whose rules were all taken away), else the refresh would run again on every page."""

    def login_failure(self) -> HttpResponse:
        if self.request.user.is_authenticated:
            auth.logout(self.request)
        return super().login_failure()
