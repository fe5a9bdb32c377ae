"""Token authentication that slows down guessing: after too many failed token attempts from
one address, further token attempts from it are refused (429, Retry-After) for a while.

DRF's throttles run after authentication, and a failed authentication ends the request first,
so they never see failures: the count is kept here, in the cache, per client address
(finops.client_address: X-Forwarded-For only behind FINOPS_PROXY_COUNT proxies). The rate is
the "token_failure" entry of REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]. A valid token is never
refused: once an address is blocked its wrong tokens get 429 instead of 401 (and are no longer
counted), while a colleague behind the same address with a good token gets through. Tokens are
long random keys, so the limit is against noise and load, not a guess that could succeed.
Logins to the pages are limited by django-axes, on the same address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from finops.client_address import client_address
from finops.tokens.authentication import ApiTokenAuthentication


class TokenFailureThrottle(SimpleRateThrottle):
    """Counts failed token attempts per address; blocked once the rate's count is reached."""

    scope = "token_failure"
    # Set by SimpleRateThrottle.__init__ from the rate (the stubs leave them out).
    num_requests: int | None
    duration: int | None

    def get_ident(self, request: Request) -> str:
        return client_address(request)

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request: Request) -> None:
        self.key = self.get_cache_key(request, None)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - (self.duration or 0):
            self.history.pop()

    def blocked_for(self, request: Request) -> float | None:
        """Seconds until the next attempt is allowed, or None when it is allowed now."""
        self._load(request)
        if self.num_requests is not None and len(self.history) >= self.num_requests:
            return self.wait()
        return None

    def record_failure(self, request: Request) -> None:
        self._load(request)
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)


def _token_attempt(request: Request, keyword: str) -> bool:
    auth = get_authorization_header(request).split()
    return bool(auth) and auth[0].lower() == keyword.lower().encode()


def _throttled(request: Request, authenticate: Callable[[], Any]) -> Any:
    """Run one token authentication: a valid token passes; a failure counts, and once the
    address has failed too often it is answered 429 instead of 401."""
    try:
        return authenticate()
    except AuthenticationFailed:
        throttle = TokenFailureThrottle()
        wait = throttle.blocked_for(request)
        if wait is not None:
            raise Throttled(
                wait=wait,
                detail="Too many failed token attempts from this address. Try again later.",
            ) from None
        throttle.record_failure(request)
        raise


class ThrottledApiTokenAuthentication(ApiTokenAuthentication):
    """The per-user API tokens (finops.tokens), with failed attempts counted per address."""

    def authenticate(self, request: Request) -> Any:
        if not _token_attempt(request, self.keyword):
            return None  # not a token attempt: nothing to count
        return _throttled(
            request, lambda: super(ThrottledApiTokenAuthentication, self).authenticate(request)
        )


class ThrottledTokenAuthentication(TokenAuthentication):
    """DRF's own authtoken keys (made in the admin), with failed attempts counted likewise."""

    def authenticate(self, request: Request) -> Any:
        if not _token_attempt(request, self.keyword):
            return None
        return _throttled(
            request, lambda: super(ThrottledTokenAuthentication, self).authenticate(request)
        )
