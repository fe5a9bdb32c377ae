"""The cost explorer API on fixtures/explorer/: every case of its expected.json (worked out by
hand in its README), through the real import and attribution."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.explorer_month import FOLDER, explorer_month  # noqa: F401 - the fixture

CASES = json.loads((FOLDER / "expected.json").read_text())["cases"]
pytestmark = pytest.mark.usefixtures("explorer_month")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_expected(case: dict[str, Any], finance_api: APIClient, lead_api: APIClient) -> None:
    api = finance_api if case["user"] == "finance" else lead_api
    response = api.get("/api/v1/costs/", case["query"])
    if "status" in case:
        assert response.status_code == case["status"], response.content
        return
    assert response.status_code == 200, response.content
    key = case["query"]["group_by"]
    got = [(p["t"], p[key], Decimal(p["cost"])) for p in response.json()]
    assert got == [(t, k, Decimal(cost)) for t, k, cost in case["points"]]
    assert {p["currency"] for p in response.json()} == {"USD"}
