"""Pagination for the API: limit/offset pages for JSON, every row for a CSV download."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.views import APIView

from finops.api.csv import CsvRenderer


class CsvAwarePagination(LimitOffsetPagination):
    """Pages for JSON; every matching row for `?format=csv` (a download is the whole list)."""

    def paginate_queryset(
        self,
        queryset: QuerySet[Any, Any] | Sequence[Any],
        request: Request,
        view: APIView | None = None,
    ) -> list[Any] | None:
        renderer = getattr(request, "accepted_renderer", None)
        if renderer is not None and renderer.format == CsvRenderer.format:
            return None
        return super().paginate_queryset(queryset, request, view)
