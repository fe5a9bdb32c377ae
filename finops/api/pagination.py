"""List pagination with bounds: a limit or offset outside them is a 400 naming the field;
JSON answers in pages, a CSV download (`?format=csv`) is every matching row.

DRF's LimitOffsetPagination passes any integer on to the database, and one past 2^63 - 1
overflows the driver (a 500), so both are checked here, and a page is at most MAX_LIMIT rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.views import APIView

from finops.api.csv import CsvRenderer

_WHOLE_NUMBER = re.compile(r"-?[0-9]+")
MAX_LIMIT = 1000
# Far above any table's row count, far below the 64-bit bound of SQLite and PostgreSQL.
MAX_OFFSET = 10**12


def _bounded_int(request: Request, name: str, *, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    # ASCII digits only: int() would also take " 7", "1_000" and Arabic-Indic digits.
    if _WHOLE_NUMBER.fullmatch(raw) is None:
        raise ValidationError({name: [f"{name} must be a whole number."]})
    value = int(raw)
    if not low <= value <= high:
        raise ValidationError({name: [f"{name} must be between {low} and {high}."]})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT
    # Read by the schema (finops.api.schema) to document the offset's maximum.
    max_offset = MAX_OFFSET

    def get_limit(self, request: Request) -> int:
        default = self.default_limit or MAX_LIMIT
        return _bounded_int(request, self.limit_query_param, default=default, low=1, high=MAX_LIMIT)

    def get_offset(self, request: Request) -> int:
        return _bounded_int(request, self.offset_query_param, default=0, low=0, high=MAX_OFFSET)


class CsvAwarePagination(BoundedLimitOffsetPagination):
    """Pages for JSON; every matching row for `?format=csv` (a download is the whole list)."""

    def paginate_queryset(
        self,
        queryset: QuerySet[Any, Any] | Sequence[Any],
        request: Request,
        view: APIView | None = None,
    ) -> list[Any] | None:
        renderer = getattr(request, "accepted_renderer", None)
        if renderer is not None and renderer.format == CsvRenderer.format:
            # Not used, but checked: a bad limit is a 400 whatever the format.
            self.get_limit(request)
            self.get_offset(request)
            return None
        return super().paginate_queryset(queryset, request, view)
