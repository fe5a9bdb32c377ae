"""Who may open a page, beyond login: the finance-only pages share one check."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from finops.org.permissions import user_is_finance


def require_finance(request: HttpRequest) -> None:
    """PermissionDenied (403) unless the user is finance."""
    if not user_is_finance(request.user):
        raise PermissionDenied("Finance only.")
