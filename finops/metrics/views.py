"""GET /metrics for Prometheus: only with an API token (`Authorization: Token fo_...`; in
Prometheus' scrape config `authorization: {type: Token, credentials_file: ...}`), never a
browser session. A lead's token (or one limited to teams) scrapes their teams' series only."""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.cache import cache
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from finops.api.authentication import ThrottledApiTokenAuthentication
from finops.api.cache import cache_seconds, user_scope
from finops.metrics.exposition import CONTENT_TYPE, metrics_text
from finops.metrics.selectors import (
    MoneyFigures,
    metric_months,
    metrics_for,
    money_figures_for,
)
from finops.org.selectors import data_version_of_request


class PrometheusTextRenderer(BaseRenderer):
    """text/plain, which Prometheus asks for (beside OpenMetrics); errors as one line."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        if isinstance(data, bytes):
            return data
        if isinstance(data, dict) and "detail" in data:
            return f"{data['detail']}\n".encode()
        return f"{data}\n".encode()


@extend_schema(exclude=True)  # not part of the REST API (/api/v1/): Prometheus' own format
class MetricsView(APIView):
    authentication_classes = [ThrottledApiTokenAuthentication]
    permission_classes = [IsAuthenticated]
    renderer_classes = [PrometheusTextRenderer]

    def get(self, request: Request) -> HttpResponse:
        body = metrics_text(metrics_for(user=request.user, money=_cached_money(request)))
        return HttpResponse(body, content_type=CONTENT_TYPE)


def _cached_money(request: Request) -> MoneyFigures:
    """The money figures, computed once per data version and scope (as the API's answers:
    finops/api/cache.py): a scrape every few minutes does not sum the month's bill each time.
    The pipeline's freshness is read at every scrape."""
    user = request.user
    seconds = cache_seconds()
    if not seconds:
        return money_figures_for(user=user, months=metric_months())
    parts = [str(data_version_of_request(request)), f"{timezone.now():%Y-%m-%d}", user_scope(user)]
    key = "finops:metrics:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()
    money = cache.get(key)
    if not isinstance(money, MoneyFigures):
        money = money_figures_for(user=user, months=metric_months())
        cache.set(key, money, seconds)
    return money
