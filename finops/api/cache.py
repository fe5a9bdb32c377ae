"""Cached JSON answers of the read endpoints, in Django's cache (Redis with CACHE_URL, else each
process's locmem cache).

The key holds everything the body depends on:
- the data version (finops.org.DataVersion, read from the database on every request, in the
  token's own query for a token request), bumped
  after every commit that changes what a report shows: a new version makes every older answer
  unreachable, so new data shows in the very next response;
- the caller's scope: "all" for finance (and viewers), else the ids of the teams they may see
  (a lead's teams, narrowed by their API token): a lead never gets finance's body, and two
  callers share an answer only when they may see exactly the same rows;
- today's date (a budget's default as_of, a series' default until);
- the absolute URL (host and scheme: bodies hold hyperlinks; path and query) and the
  negotiated media type. Only JSON is cached: the browsable API's HTML holds the user's name
  and a CSRF token, and CSV downloads are rare.

The version is read before the body is computed: a write that commits in between is cached
under the older version at worst, which the bump has already made unreachable.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, TypeVar, cast

from django.conf import settings
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save
from django.http import HttpResponse, HttpResponseBase
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request

from finops.org.permissions import AnyUser, user_is_finance
from finops.org.selectors import data_version_of_request, team_list_visible
from finops.org.services import data_version_bump

KEY_PREFIX = "finops:api:v1"
Handler = TypeVar("Handler", bound=Callable[..., HttpResponseBase])


def cache_seconds() -> int:
    """How long an answer is kept at most (0: no cache). The data version, not this, is what
    keeps answers fresh; the timeout only bounds the memory old versions take."""
    return int(getattr(settings, "FINOPS_API_CACHE_SECONDS", 0))


def user_scope(user: AnyUser) -> str:
    """What the caller may see, as a key part: "all", or the sorted ids of their teams."""
    if user_is_finance(user):
        return "all"
    ids = sorted(team_list_visible(user=user).values_list("pk", flat=True))
    return "teams:" + ",".join(str(pk) for pk in ids)


def response_cache_key(request: Request) -> str | None:
    """The key of this request's answer, or None when it is not cached."""
    if request.method != "GET" or not cache_seconds():
        return None
    renderer = getattr(request, "accepted_renderer", None)
    if not isinstance(renderer, JSONRenderer) or not request.user.is_authenticated:
        return None
    parts = [
        str(data_version_of_request(request)),
        timezone.now().date().isoformat(),
        user_scope(request.user),
        str(getattr(request, "accepted_media_type", "")),
        request.build_absolute_uri(),
    ]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return f"{KEY_PREFIX}:{digest}"


def cached_read(handler: Handler) -> Handler:
    """Wrap a DRF handler (get, list): a hit answers the stored bytes; a 200 miss stores the
    rendered body once rendered. Runs after DRF's authentication and permission checks."""

    @functools.wraps(handler)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        key = response_cache_key(request)
        if key is not None:
            hit = cache.get(key)
            if hit is not None:
                content, content_type = hit
                return HttpResponse(content, content_type=content_type)
        response = handler(view, request, *args, **kwargs)
        if key is not None and response.status_code == 200:
            add_callback = getattr(response, "add_post_render_callback", None)
            if add_callback is not None:
                add_callback(lambda rendered: _store(key, rendered))
        return response

    # Typed as the handler it wraps (DRF's signature), though a hit is a plain HttpResponse:
    # DRF's finalize_response takes any HttpResponseBase.
    return cast(Handler, wrapper)


def _store(key: str, response: HttpResponse) -> None:
    cache.set(key, (response.content, response["Content-Type"]), cache_seconds())


def _bump_on_save(**_: Any) -> None:
    data_version_bump()


def connect_signals() -> None:
    """Single-row writes (forms, the admin, services' save()) of what the cached answers show
    bump the version too. Bulk writes (the ledger, FX files, the outbox) bump explicitly."""
    from finops.budgets.models import Budget, BudgetAlert, BudgetOptOut
    from finops.currency.models import FxRate
    from finops.org.models import Team

    for model in (Team, Budget, BudgetAlert, BudgetOptOut, FxRate):
        post_save.connect(_bump_on_save, sender=model, dispatch_uid=f"api-cache-{model.__name__}")
        post_delete.connect(
            _bump_on_save, sender=model, dispatch_uid=f"api-cache-del-{model.__name__}"
        )
