"""The first step of every API request (DRF negotiates the format before it authenticates):
a query parameter that is given must have a value.

DRF and django-filter take `?team=`, `?until=`, `?limit=` or `?format=` as "not given", while
the schema says a date, a slug, an integer or one of json/csv; a client that sends an empty
value has a bug worth hearing about. So an empty value is a 400 naming the parameter, and the
schema says minLength 1 (finops.api.schema). To not filter, leave the parameter out.
"""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

EMPTY_MESSAGE = "May not be empty: leave the parameter out instead."


def query_empty_values_reject(request: Request) -> None:
    """ValidationError naming every query parameter given with an empty value."""
    empty = sorted(
        {name for name, values in request.query_params.lists() if any(v == "" for v in values)}
    )
    if empty:
        raise ValidationError({name: [EMPTY_MESSAGE] for name in empty})


class StrictQueryNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        query_empty_values_reject(request)
        return super().select_renderer(request, renderers, format_suffix)
