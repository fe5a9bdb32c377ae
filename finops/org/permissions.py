"""Who may see and do what.

- finance (or a superuser) sees every team and may change things: close a month, upload,
  edit the configuration in the admin;
- a viewer sees everything finance sees and changes nothing;
- a team lead sees only their own teams and changes nothing finance owns.

`user_is_finance` answers "sees what finance sees" (finance, viewer, superuser): every read
check uses it. `user_may_edit` answers "may change finance's data" (finance, superuser): every
write uses it, and ViewerReadOnly / ViewerReadOnlyMiddleware refuse a viewer's writes anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from rest_framework.permissions import SAFE_METHODS, BasePermission

from finops.org.models import Profile

if TYPE_CHECKING:
    # Not at run time: rest_framework.views reads DEFAULT_PERMISSION_CLASSES on import, which
    # names this module (a circular import).
    from rest_framework.request import Request
    from rest_framework.views import APIView

AnyUser = AbstractBaseUser | AnonymousUser


def user_profile(user: AnyUser) -> Profile | None:
    """The user's Profile, or None (anonymous, or a user nobody gave a role yet)."""
    if not user.is_authenticated:
        return None
    try:
        return user.finops_profile  # type: ignore[union-attr,attr-defined]
    except Profile.DoesNotExist:
        return None


def _role(user: AnyUser) -> str | None:
    profile = user_profile(user)
    return profile.role if profile is not None else None


# Set on the request's user by finops.tokens.authentication for a team-limited API token: the
# ids of the teams the token may see. Such a token acts as a team lead of those teams (no
# org-wide buckets, no finance-only endpoints), whatever the user's own role.
TOKEN_TEAM_LIMIT_ATTR = "finops_token_team_ids"


def token_team_limit(user: AnyUser) -> frozenset[int] | None:
    """The team ids an API token limits this request to, or None (no limit)."""
    limit: frozenset[int] | None = getattr(user, TOKEN_TEAM_LIMIT_ATTR, None)
    return limit


def user_is_finance(user: AnyUser) -> bool:
    """Sees every team and the org-wide buckets, as finance does: finance, a read-only viewer
    or a superuser, not limited by an API token's teams."""
    return token_team_limit(user) is None and user_has_finance_role(user)


def user_has_finance_role(user: AnyUser) -> bool:
    """Finance or viewer by role (or superuser), ignoring any API token's team limit."""
    if not user.is_authenticated or not user.is_active:
        return False
    if getattr(user, "is_superuser", False):
        return True
    return _role(user) in (Profile.Role.FINANCE, Profile.Role.VIEWER)


def user_is_viewer(user: AnyUser) -> bool:
    """A read-only viewer (a superuser never is one, whatever their profile says)."""
    if not user.is_authenticated or getattr(user, "is_superuser", False):
        return False
    return _role(user) == Profile.Role.VIEWER


def user_may_edit(user: AnyUser) -> bool:
    """May change finance's data (close a month, upload, edit rules): finance or a superuser,
    not through an API token limited to some teams."""
    if not user.is_authenticated or not user.is_active or token_team_limit(user) is not None:
        return False
    if getattr(user, "is_superuser", False):
        return True
    return _role(user) == Profile.Role.FINANCE


class IsFinance(BasePermission):
    """DRF permission: what finance sees (finance, viewers, superusers) for reads; writes only
    for those who may edit, so a view that names its own permission classes (replacing the
    defaults) still keeps a viewer read-only."""

    message = "Only finance users may see this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user: Any = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return user_is_finance(user)
        return user_may_edit(user)


# Marks a view (a function, or an API view class) that changes only the signed-in user's own
# account: their API tokens, their email settings, their opt-out of a budget's emails. A viewer
# may write there: the role is read-only on the organisation's data, not on the viewer's own.
OWN_ACCOUNT_ATTR = "finops_own_account_write"

_View = Any


def own_account_write(view: _View) -> _View:
    """Decorator: `view` changes nothing but the signed-in user's own account (see above)."""
    setattr(view, OWN_ACCOUNT_ATTR, True)
    return view


def view_writes_own_account(view: Any) -> bool:
    """Whether a resolved view (a function, an APIView, or as_view()'s function) is marked."""
    return bool(
        getattr(view, OWN_ACCOUNT_ATTR, False)
        or getattr(getattr(view, "cls", None), OWN_ACCOUNT_ATTR, False)
        or getattr(getattr(view, "view_class", None), OWN_ACCOUNT_ATTR, False)
    )


class ViewerReadOnly(BasePermission):
    """DRF permission (a default for every view): a viewer may read, never write (but to
    their own account: own_account_write)."""

    message = "The viewer role is read-only."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in SAFE_METHODS or view_writes_own_account(view):
            return True
        user: Any = request.user
        return not (user and user_is_viewer(user))


# Paths a viewer may still POST to: logging in and out changes no finance data.
_VIEWER_POST_ALLOWED = ("/accounts/login/", "/accounts/logout/", "/admin/logout/")


class ViewerReadOnlyMiddleware:
    """Refuses every unsafe request of a session-authenticated viewer (pages, admin, API), so
    a page added later cannot forget the check; views marked own_account_write are let
    through. Token-authenticated API calls are refused by ViewerReadOnly, since DRF
    authenticates tokens after the middleware ran."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponse],
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponse | None:
        if (
            request.method not in SAFE_METHODS
            and request.path not in _VIEWER_POST_ALLOWED
            and not view_writes_own_account(view_func)
            and user_is_viewer(request.user)
        ):
            return HttpResponseForbidden("The viewer role is read-only.")
        return None
