"""OpenAPI that tells the truth: the error responses every operation can give, WWW-Authenticate
on 401, `month` as a YYYY-MM string, `limit`/`offset` with their bounds, a query parameter's
value never empty (minLength 1: an empty `?team=` is a 400, not "no filter"; leave it out),
errors as JSON whatever format was asked for, and a CSV download (`?format=csv`) as CSV text,
not as the JSON body's schema.

FinopsAutoSchema is DEFAULT_SCHEMA_CLASS, so every view, present and future, gets the shared
error responses without a decorator each: 401 everywhere a login is needed, 403 where a
permission beyond login applies or the method writes (read-only tokens, CSRF), 404 on paths
with a parameter, 400 where the operation takes query parameters or a body. An explicit
@extend_schema(responses={code: ...}) still wins for its code.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS, AllowAny, IsAuthenticated

from finops.api.fields import NO_NUL
from finops.core.months import MONTH_PATTERN
from finops.org.permissions import ViewerReadOnly

MONTH_SCHEMA: dict[str, Any] = {"type": "string", "pattern": MONTH_PATTERN, "example": "2025-09"}


def month_parameter(*, required: bool, description: str = "Billing month, YYYY-MM.") -> Any:
    return OpenApiParameter(
        "month", OpenApiTypes.STR, required=required, pattern=MONTH_PATTERN, description=description
    )


SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"
NO_NUL_PATTERN = NO_NUL
CURRENCY_PATTERN = r"^[A-Za-z]{3}$"


def team_parameter(*, description: str = "team slug") -> Any:
    """`team`: a slug (ASCII letters, digits, - and _), as the views' SlugField checks."""
    return OpenApiParameter("team", OpenApiTypes.STR, pattern=SLUG_PATTERN, description=description)


class ErrorSerializer(serializers.Serializer[Any]):
    """DRF's error body for 401, 403, 404 and some 400s."""

    detail = serializers.CharField()


BAD_REQUEST = OpenApiResponse(
    response=OpenApiTypes.OBJECT,
    description='Invalid query or body: each field\'s messages (`{"month": ["..."]}`), or '
    '`{"detail": "..."}` (e.g. a missing FX rate).',
)
UNAUTHENTICATED = OpenApiResponse(
    response=ErrorSerializer,
    description="No or bad credentials. `WWW-Authenticate: Token` says how to authenticate.",
)
FORBIDDEN = OpenApiResponse(
    response=ErrorSerializer,
    description="Not allowed: finance-only data, a read-only token on a write, or CSRF.",
)
NOT_FOUND = OpenApiResponse(
    response=ErrorSerializer, description="No such object among those the caller may see."
)

WWW_AUTHENTICATE_HEADER = {
    "WWW-Authenticate": {
        "schema": {"type": "string"},
        "description": 'How to authenticate: `Token realm="api"`.',
    }
}

# The permissions that only mean "logged in" for a read (no 403 for a reader): ViewerReadOnly,
# a default of every view, refuses only writes, which get their 403 from the method below.
_LOGIN_ONLY = (IsAuthenticated, AllowAny, ViewerReadOnly)


JSON = "application/json"
CSV = "text/csv"
CSV_SCHEMA: dict[str, Any] = {
    "type": "string",
    "description": "CSV (RFC 4180, UTF-8): a header row, then one row per item of the JSON "
    "answer (every matching row, not one page), nested values as dotted columns.",
}


class FinopsAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for code, response in self._error_responses().items():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    response, code, media_types=[JSON], direction=direction
                )
        for code, response in responses.items():
            content = response.get("content")
            if not content:
                continue
            if code >= "400" and JSON in content:
                # finops.api.csv renders an error as JSON even for ?format=csv.
                response["content"] = {JSON: content[JSON]}
            elif CSV in content and content[CSV].get("schema", {}).get("type") != "string":
                content[CSV] = {"schema": CSV_SCHEMA}
        return responses

    def _get_request_body(self, direction: Any = "request") -> Any:
        """A body whose schema has required properties is itself required (an inline schema,
        e.g. the anomaly PATCH's, is not marked so by drf-spectacular)."""
        body = super()._get_request_body(direction)
        if body and not body.get("required"):
            schemas = [media.get("schema", {}) for media in body.get("content", {}).values()]
            if any(schema.get("required") for schema in schemas):
                body["required"] = True
        return body

    def _get_parameters(self) -> list[dict[str, Any]]:
        """Every query parameter given must have a value (finops.api.negotiation): a string one
        without an enum (which has no "") says minLength 1, a list (`ordering`) minItems 1."""
        parameters: list[dict[str, Any]] = super()._get_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if parameter["in"] != "query":
                continue
            if schema.get("type") == "string" and "enum" not in schema:
                schema.setdefault("minLength", 1)
                if not {"pattern", "format"} & schema.keys():
                    # DRF's text fields refuse a NUL character (a 400), so the schema says so.
                    schema["pattern"] = NO_NUL_PATTERN
            elif schema.get("type") == "array":
                schema.setdefault("minItems", 1)
        return parameters

    def _error_responses(self) -> dict[str, OpenApiResponse]:
        permissions = self.view.get_permissions()
        errors: dict[str, OpenApiResponse] = {}
        if self._has_query_or_body():
            errors["400"] = BAD_REQUEST
        if not any(isinstance(p, AllowAny) for p in permissions):
            errors["401"] = UNAUTHENTICATED
        beyond_login = any(not isinstance(p, _LOGIN_ONLY) for p in permissions)
        if beyond_login or self.method not in SAFE_METHODS:
            errors["403"] = FORBIDDEN
        # DRF answers an unknown ?format= (the CSV/JSON switch) with 404, as for a missing object.
        if "{" in self.path or any(p["name"] == "format" for p in self._get_parameters()):
            errors["404"] = NOT_FOUND
        return errors

    def _has_query_or_body(self) -> bool:
        if self.method not in SAFE_METHODS and self.method != "DELETE":
            return True
        return any(p["in"] == "query" for p in self._get_parameters())

    def _get_response_headers_for_code(self, status_code: str, direction: Any = "response") -> Any:
        headers = super()._get_response_headers_for_code(status_code, direction)
        if status_code == "401":
            return {**(headers or {}), **WWW_AUTHENTICATE_HEADER}
        return headers

    def _get_pagination_parameters(self) -> list[dict[str, Any]]:
        """limit >= 1 and offset >= 0, each at most the paginator's max (when it has one)."""
        parameters: list[dict[str, Any]] = super()._get_pagination_parameters()
        paginator = self._get_paginator()
        max_limit = getattr(paginator, "max_limit", None)
        for parameter in parameters:
            schema = parameter.setdefault("schema", {})
            if parameter["name"] == "limit" and schema.get("type") == "integer":
                schema["minimum"] = 1
                if max_limit:
                    schema["maximum"] = max_limit
            elif parameter["name"] == "offset" and schema.get("type") == "integer":
                schema["minimum"] = 0
                max_offset = getattr(paginator, "max_offset", None)
                if max_offset:
                    schema["maximum"] = max_offset
        return parameters


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """`Authorization: Token fo_...` (finops.tokens): per-user keys from /account/tokens/."""

    target_class = "finops.tokens.authentication.ApiTokenAuthentication"
    match_subclasses = True  # finops.api.authentication counts its failures
    name = "apiTokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`: a key made on /account/tokens/ or by "
            "`manage.py api_token create` (DRF authtoken keys are accepted too).",
        }
