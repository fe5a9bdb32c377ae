"""The schema and the code agree (issue 24 item 15): what schemathesis' full check set found,
pinned one request each, and the schema rules that keep them agreeing.

- A query parameter that is given must have a value: empty `?until=`, `?as_of=`, `?format=`,
  `?team=` are 400 naming it (they were taken as "not given" while the schema said a date, an
  enum, ...), and the schema says minLength 1 (a list: minItems 1).
- `month` is YYYY-MM for the years month_parse takes (1970..9998): "0000-01" matched the
  schema's pattern and was refused.
- Errors are JSON whatever the format asked for, and documented as JSON only; a CSV answer is
  documented as CSV text (not as the JSON body's schema).
- A bad limit is a 400 for a CSV download too (the CSV path skipped the check).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from finops.core.months import MAX_YEAR, MIN_YEAR, MONTH_PATTERN, month_parse
from finops.org.models import Team
from tests.factories import Scenario


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("/api/v1/anomalies/?until=", "until"),
        ("/api/v1/anomalies/?since=", "since"),
        ("/api/v1/budgets/?as_of=", "as_of"),
        ("/api/v1/teams/vision/?format=", "format"),
        ("/api/v1/teams/?limit=", "limit"),
        ("/api/v1/runs/?month=", "month"),
        ("/api/v1/runs/?ordering=", "ordering"),
        ("/api/v1/statements/?month=2025-09&team=", "team"),
        ("/api/v1/endpoints/?month=2025-09&team=", "team"),
        ("/api/v1/costs/?month=2025-09&currency=", "currency"),
    ],
)
def test_an_empty_query_value_is_a_400_naming_it(
    finance_api: APIClient, team: Team, url: str, name: str
) -> None:
    response = finance_api.get(url)

    assert response.status_code == 400, (url, response.content)
    assert response["Content-Type"] == "application/json"
    assert name in response.json()


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/costs/?interval=day&since=20250901",
        "/api/v1/anomalies/?since=2025-9-1",
        "/api/v1/budgets/?as_of=2025-W36-1",
        "/api/v1/teams/?limit=%D9%A3",  # an Arabic-Indic three
        "/api/v1/teams/?limit=1_0",
        "/api/v1/teams/?format=csv&limit=-1.5",
        "/api/v1/teams/?format=csv&offset=null",
        "/api/v1/runs/?month=2025-9",
        "/api/v1/costs/?month=2025-09&currency=usd1",
        "/api/v1/anomalies/?team=vi%00sion",
    ],
)
def test_values_the_schema_calls_invalid_are_400(
    finance_api: APIClient, team: Team, url: str
) -> None:
    response = finance_api.get(url)

    assert response.status_code == 400, (url, response.content)
    assert response["Content-Type"] == "application/json"


def test_month_pattern_takes_exactly_the_months_month_parse_takes() -> None:
    for year in [0, 1, 999, 1969, MIN_YEAR, 1999, 2025, 8999, 9000, 9899, 9989, MAX_YEAR, 9999]:
        text = f"{year:04d}-01"
        try:
            month_parse(text)
            parsed = True
        except ValueError:
            parsed = False
        assert (re.fullmatch(MONTH_PATTERN, text) is not None) is parsed, text
    assert re.fullmatch(MONTH_PATTERN, "٢٠٢٥-09") is None


@pytest.mark.parametrize("month", ["1970-01", "9998-12"])
def test_the_pattern_s_edge_months_are_answered(
    finance_api: APIClient, finance_user: User, month: str
) -> None:
    for url in ["/api/v1/reconciliation/", "/api/v1/endpoints/", "/api/v1/statements/"]:
        response = finance_api.get(url, {"month": month})
        assert response.status_code == 200, (url, month, response.content)


def test_errors_are_json_even_for_a_csv_download(finance_api: APIClient, team: Team) -> None:
    response = finance_api.get("/api/v1/reconciliation/?month=2025-13&format=csv")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "month" in response.json()
    assert "Content-Disposition" not in response


def test_a_csv_answer_is_still_csv(finance_api: APIClient, scenario: Scenario) -> None:
    response = finance_api.get("/api/v1/teams/?format=csv")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response.content.decode().splitlines()[0] == "slug,name"


def test_statement_files_take_no_format_and_answer_json_errors(
    finance_api: APIClient, team: Team, schema: dict[str, Any]
) -> None:
    operation = schema["paths"]["/api/v1/statements/{team}/{month}.{extension}"]["get"]
    assert "format" not in {p["name"] for p in operation["parameters"]}
    response = finance_api.get("/api/v1/statements/vision/2025-13.csv")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def test_errors_are_documented_as_json_only(schema: dict[str, Any]) -> None:
    for path, method, operation in _operations(schema):
        for code, response in operation["responses"].items():
            if code >= "400" and "content" in response:
                assert list(response["content"]) == ["application/json"], (path, method, code)


def test_csv_answers_are_documented_as_text(schema: dict[str, Any]) -> None:
    csv_operations = 0
    for path, method, operation in _operations(schema):
        for code, response in operation["responses"].items():
            csv = response.get("content", {}).get("text/csv")
            if csv is not None:
                csv_operations += 1
                assert csv["schema"]["type"] == "string", (path, method, code)
    assert csv_operations >= 15


def test_every_query_parameter_refuses_an_empty_value(schema: dict[str, Any]) -> None:
    for path, method, operation in _operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "query":
                continue
            param_schema = parameter["schema"]
            where = (path, method, parameter["name"])
            if param_schema["type"] == "string":
                assert "enum" in param_schema or param_schema.get("minLength") == 1, where
                # Free text says it refuses NUL (DRF's text fields answer 400 to one).
                pattern = param_schema.get("pattern")
                if pattern is not None and "enum" not in param_schema:
                    assert re.search(pattern, "a\x00b") is None, where
            elif param_schema["type"] == "array":
                assert param_schema.get("minItems") == 1, where


def test_request_bodies_are_json_only(schema: dict[str, Any]) -> None:
    for path, method, operation in _operations(schema):
        body = operation.get("requestBody")
        if body is not None:
            assert list(body["content"]) == ["application/json"], (path, method)


def test_a_move_the_anomaly_workflow_has_not_is_409(
    finance_api: APIClient, schema: dict[str, Any]
) -> None:
    responses = schema["paths"]["/api/v1/anomalies/{id}/"]["patch"]["responses"]
    assert "409" in responses
    body = schema["paths"]["/api/v1/anomalies/{id}/"]["patch"]["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"]["required"] == ["status", "comment"]
