"""The client's address, one definition for every per-address limit (API token failures in
finops.api.authentication, login lockouts by django-axes through AXES_CLIENT_IP_CALLABLE).

X-Forwarded-For is written by whoever sends the request, so it is read only when the site says
it sits behind proxies (FINOPS_PROXY_COUNT=N): the client is then the N-th address from the
right, the one the outermost of our own proxies saw. With the default 0 it is ignored and the
address is the socket's (REMOTE_ADDR): a client cannot pick a fresh address per attempt, nor
pose as someone else to lock them out.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def proxy_count() -> int:
    return int(getattr(settings, "FINOPS_PROXY_COUNT", 0) or 0)


def client_address(request: HttpRequest) -> str:
    """REMOTE_ADDR, or behind FINOPS_PROXY_COUNT proxies the address they were sent from."""
    remote = str(request.META.get("REMOTE_ADDR", "") or "")
    count = proxy_count()
    forwarded = str(request.META.get("HTTP_X_FORWARDED_FOR", "") or "")
    if count <= 0 or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    if not hops:
        return remote
    # Our N proxies appended N entries; a client's own (forged) entries are further left.
    return hops[-min(count, len(hops))]
