"""Limit/offset pagination with bounds: a page of at most MAX_LIMIT rows, and an offset no
database integer overflows on (a fuzzed `?limit=10**28` was a 500 on SQLite and PostgreSQL).

Out-of-range values are clamped, as DRF already does for a limit above max_limit; stricter
400s for malformed values belong to the API's query validation.
"""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_LIMIT = 1000
# Far beyond any table here, far below a signed 64-bit integer.
MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT
    max_offset = MAX_OFFSET

    def get_offset(self, request: Request) -> int:
        return min(super().get_offset(request), self.max_offset)
