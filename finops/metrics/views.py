"""GET /metrics for Prometheus: only with an API token (`Authorization: Token fo_...`; in
Prometheus' scrape config `authorization: {type: Token, credentials_file: ...}`), never a
browser session. A lead's token (or one limited to teams) scrapes their teams' series only."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from finops.api.authentication import ThrottledApiTokenAuthentication
from finops.metrics.exposition import CONTENT_TYPE, metrics_text
from finops.metrics.selectors import metrics_for


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
        body = metrics_text(metrics_for(user=request.user))
        return HttpResponse(body, content_type=CONTENT_TYPE)
