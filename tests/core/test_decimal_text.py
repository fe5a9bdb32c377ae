"""A Decimal is never written with an exponent (issue 24 item 16): a zero of 12 places was
"0E-12" in the runs' `mix` (API JSON and CSV), 10^-12 was "1E-12". Every place a Decimal is
written goes through finops.core.money.decimal_text, or a DRF DecimalField, or a display
filter; each is rendered here with a zero, a tiny and a huge value. The last test keeps
`str()` of money out of the modules that write answers, files and pages.
"""

from __future__ import annotations

import ast
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.test import Client
from rest_framework.test import APIClient

from finops.api.csv import rows_of, write_csv
from finops.api.renderers import JSONRenderer
from finops.attribution.models import RunCost
from finops.core.money import decimal_text
from finops.web.templatetags import finops_tags
from tests.factories import Scenario

ROOT = Path(__file__).resolve().parents[2]
EXPONENT = re.compile(r"[0-9]E[-+]?[0-9]", re.IGNORECASE)
ZERO = Decimal("0E-12")  # how a stored zero comes back (12 places)
TINY = Decimal("1E-12")  # one unit of the last stored place
HUGE = Decimal("1E+15")  # a quadrillion: str() writes "1E+15"
VALUES = [ZERO, Decimal("-0E-12"), TINY, Decimal("-1E-12"), HUGE, Decimal("1E-20")]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (ZERO, "0.000000000000"),
        (Decimal("-0E-12"), "0.000000000000"),
        (TINY, "0.000000000001"),
        (Decimal("-1E-12"), "-0.000000000001"),
        (HUGE, "1000000000000000"),
        (Decimal("1.5E+3"), "1500"),
        (Decimal("12.50"), "12.50"),
    ],
)
def test_decimal_text_is_fixed_point(value: Decimal, text: str) -> None:
    assert decimal_text(value) == text


def test_the_json_renderer_writes_a_bare_decimal_as_fixed_point_text() -> None:
    body = JSONRenderer().render({"values": VALUES}).decode()

    assert not EXPONENT.search(body), body
    assert json.loads(body)["values"][0] == "0.000000000000"


def test_api_csv_cells_are_fixed_point() -> None:
    text = write_csv(rows_of([{"a": v, "b": [v, v], "c": {"d": v}} for v in VALUES]))

    assert not EXPONENT.search(text), text
    assert "0.000000000001" in text


@pytest.fixture
def odd_run(scenario: Scenario) -> RunCost:
    """The scenario's run with a zero, a tiny and a huge amount in its mix (stored: 12 places)."""
    run = scenario.run
    run.cost_on_demand = Decimal(0)
    run.cost_spot = TINY
    run.cost_commitment = HUGE
    run.cost_other = Decimal("-0.000000000001")
    run.save()
    return run


def test_runs_api_json_list_and_detail(finance_api: APIClient, odd_run: RunCost) -> None:
    listed = finance_api.get("/api/v1/runs/", {"month": "2025-09"})
    detail = finance_api.get(f"/api/v1/runs/{odd_run.pk}/")

    for response in (listed, detail):
        assert response.status_code == 200
        assert not EXPONENT.search(response.content.decode()), response.content
    mix = detail.json()["mix"]
    assert mix == {
        "on_demand": "0.000000000000",
        "spot": "0.000000000001",
        "commitment": "1000000000000000.000000000000",
        "other": "-0.000000000001",
    }
    row = next(r for r in listed.json()["results"] if r["id"] == odd_run.pk)
    assert row["mix"] == mix


def test_runs_api_csv(finance_api: APIClient, odd_run: RunCost) -> None:
    response = finance_api.get("/api/v1/runs/", {"month": "2025-09", "format": "csv"})

    text = response.content.decode()
    assert response.status_code == 200
    assert not EXPONENT.search(text), text
    assert ",0.000000000000," in text


def test_statement_csv(finance_api: APIClient, odd_run: RunCost) -> None:
    response = finance_api.get("/api/v1/statements/vision/2025-09.csv")

    assert response.status_code == 200
    assert not EXPONENT.search(response.content.decode())


@pytest.mark.parametrize(
    "name", ["money", "signed_money", "unit_money", "hours", "percent", "count"]
)
def test_display_filters(name: str) -> None:
    fn = getattr(finops_tags, name)
    for value in VALUES:
        assert not EXPONENT.search(fn(value)), (name, value, fn(value))


def test_pages_of_the_run(finance_client: Client, odd_run: RunCost) -> None:
    for url in ["/runs/?month=2025-09", f"/runs/vision/{odd_run.run_id}/?month=2025-09"]:
        response = finance_client.get(url)
        assert response.status_code == 200, url
        assert not EXPONENT.search(_figures(response.content.decode())), url


# What is not a figure: the head (hashed static names, e.g. finops.2e9….css) and the random
# tokens of forms and links (csrfmiddlewaretoken, hrefs); a figure's data-value stays.
_NOT_FIGURES = re.compile(
    r"<head>.*?</head>|\b(?:href|src|action)=\"[^\"]*\""
    r"|name=\"csrfmiddlewaretoken\" value=\"[^\"]*\"",
    re.S,
)


def _figures(html: str) -> str:
    return _NOT_FIGURES.sub("", html)


# Modules that write what people and programs read: API bodies and CSV, statement files,
# exports, display filters. In them a Decimal is written with decimal_text (or a field or
# filter that formats it), never str(): str(Decimal("0E-12")) is "0E-12".
OUTPUT_MODULES = [
    "finops/api",
    "finops/chargeback/documents.py",
    "finops/exports",
    "finops/web/templatetags",
]
MONEY_WORDS = re.compile(
    r"cost|amount|total|price|rate|billed|effective|spend|actual|forecast|mix|hours|seconds"
)


def _str_of_money(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "str"
            and len(node.args) == 1
        ):
            argument = ast.unparse(node.args[0])
            if MONEY_WORDS.search(argument.lower()):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: str({argument})")
    return found


def test_no_str_of_money_in_output_modules() -> None:
    files: list[Path] = []
    for entry in OUTPUT_MODULES:
        target = ROOT / entry
        files.extend(sorted(target.rglob("*.py")) if target.is_dir() else [target])
    assert len(files) > 10
    found = [hit for path in files for hit in _str_of_money(path)]
    assert found == [], "write Decimals with finops.core.money.decimal_text:\n" + "\n".join(found)
