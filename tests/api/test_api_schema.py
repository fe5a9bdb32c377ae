"""The OpenAPI schema validates with no warning and tells the truth about errors and params."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from finops.core.months import MONTH_PATTERN
from finops.org.models import Team
from finops.tokens.services import api_token_create

MONTH = MONTH_PATTERN


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def _parameter(schema: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    (parameter,) = [p for p in schema["paths"][path][method]["parameters"] if p["name"] == name]
    return parameter


def _codes(schema: dict[str, Any], path: str, method: str) -> set[str]:
    return set(schema["paths"][path][method]["responses"])


def test_spectacular_validates_with_no_warning(tmp_path: Path) -> None:
    out = tmp_path / "schema.yaml"
    # Raises (SchemaGenerationError / SystemExit) on any warning or validation error.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "openapi: 3" in out.read_text()


@pytest.mark.parametrize(
    "path", ["/api/v1/runs/", "/api/v1/costs/", "/api/v1/endpoints/", "/api/v1/reconciliation/"]
)
def test_month_is_a_yyyy_mm_string_not_a_date(schema: dict, path: str) -> None:
    month = _parameter(schema, path, "get", "month")["schema"]
    assert month["type"] == "string"
    assert month["pattern"] == MONTH
    assert "format" not in month
    assert re.match(month["pattern"], "2025-09")
    assert not re.match(month["pattern"], "2025-09-01")


def test_limit_and_offset_are_bounded_integers(schema: dict) -> None:
    limit = _parameter(schema, "/api/v1/runs/", "get", "limit")["schema"]
    offset = _parameter(schema, "/api/v1/runs/", "get", "offset")["schema"]
    assert (limit["type"], limit["minimum"]) == ("integer", 1)
    assert (offset["type"], offset["minimum"]) == ("integer", 0)


def test_every_operation_documents_401_with_www_authenticate(schema: dict) -> None:
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            response = operation["responses"].get("401")
            assert response, (method, path)
            assert "WWW-Authenticate" in response["headers"], (method, path)


def test_error_codes_are_documented_where_they_are_returned(schema: dict) -> None:
    assert {"200", "400", "401"} <= _codes(schema, "/api/v1/runs/", "get")
    assert "403" in _codes(schema, "/api/v1/reconciliation/", "get")
    assert "403" in _codes(schema, "/api/v1/import-batches/", "get")
    assert {"403", "404"} <= _codes(schema, "/api/v1/anomalies/{id}/", "patch")
    assert "404" in _codes(schema, "/api/v1/teams/{slug}/", "get")
    # A plain read of one's own teams has no 403 to document; its 404 is an unknown ?format=.
    assert "403" not in _codes(schema, "/api/v1/teams/", "get")
    assert "404" in _codes(schema, "/api/v1/teams/", "get")


def test_the_documented_codes_are_the_ones_returned(
    schema: dict, lead_user: User, finance_user: User
) -> None:
    """Each error the API gives here is listed for its operation, and its body has `detail`
    where the schema says so; a 401 carries the header the schema names."""
    anonymous = APIClient()
    lead = APIClient()
    lead.force_authenticate(lead_user)
    read_only = APIClient()
    read_only.credentials(
        HTTP_AUTHORIZATION="Token "
        + api_token_create(user=finance_user, name="ro", read_only=True).key
    )
    cases = [
        (anonymous.get("/api/v1/teams/"), "/api/v1/teams/", "get", 401),
        (lead.get("/api/v1/runs/", {"month": "2025-13"}), "/api/v1/runs/", "get", 400),
        (lead.get("/api/v1/reconciliation/", {"month": "2025-09"}),
         "/api/v1/reconciliation/", "get", 403),
        (lead.get("/api/v1/teams/nope/"), "/api/v1/teams/{slug}/", "get", 404),
        (read_only.patch("/api/v1/anomalies/1/", {}, format="json"),
         "/api/v1/anomalies/{id}/", "patch", 403),
    ]  # fmt: skip
    for response, path, method, code in cases:
        assert response.status_code == code, (path, response.content)
        assert str(code) in _codes(schema, path, method), (path, code)
        if code != 400:
            assert isinstance(response.json()["detail"], str)
        if code == 401:
            assert response["WWW-Authenticate"] == 'Token realm="api"'


def test_token_security_scheme_is_documented(schema: dict) -> None:
    scheme = schema["components"]["securitySchemes"]["apiTokenAuth"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")


def test_fuzz_findings_stay_fixed(finance_user: User, team: Team) -> None:
    """Schemathesis found these 500s: a month the pattern allows but the calendar lacks, and
    integers too large for the database in ?limit / ?offset."""
    api = APIClient()
    api.force_authenticate(finance_user)
    for path in ("/api/v1/reconciliation/", "/api/v1/endpoints/", "/api/v1/costs/"):
        response = api.get(path, {"month": "0000-01"})
        assert response.status_code == 400, path
        assert "month" in response.json()
    # Out of range is a 400 naming the field (issue 9, item 6), never clamped silently.
    huge = str(10**28)
    for params in ({"limit": huge}, {"offset": huge}, {"limit": huge, "offset": huge}):
        response = api.get("/api/v1/teams/", params)
        assert response.status_code == 400, params
        assert response.json(), params
        assert set(response.json()) <= set(params), params
    assert api.get("/api/v1/teams/", {"limit": 1000, "offset": 0}).json()["count"] == 1


def test_limit_and_offset_maxima_are_the_paginators(schema: dict) -> None:
    from finops.api.pagination import MAX_LIMIT, MAX_OFFSET

    limit = _parameter(schema, "/api/v1/runs/", "get", "limit")["schema"]
    offset = _parameter(schema, "/api/v1/runs/", "get", "offset")["schema"]
    assert (limit["maximum"], offset["maximum"]) == (MAX_LIMIT, MAX_OFFSET)
