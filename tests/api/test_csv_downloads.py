"""CSV downloads: `?format=csv` on the API lists, with the page's filters, every matching row
(not one page), cells neutralised against formula injection; the pages link to them."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal

from django.test import Client
from django.urls import reverse

from finops.api.csv import write_csv
from finops.attribution.models import Category
from finops.org.models import Team
from tests.client_types import Response
from tests.factories import ImportBatchFactory, RunCostFactory, TeamDailyCostFactory
from tests.page_tables import match


def _csv(response: Response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode("utf-8"))))


def test_write_csv_joins_headers_of_all_rows() -> None:
    text = write_csv([{"a": 1}, {"b": None, "a": "=x"}])
    assert text == "a,b\r\n1,\r\n'=x,\r\n"


def test_runs_csv_is_every_row_with_the_filters(
    finance_client: Client, team: Team, other_team: Team
) -> None:
    for i in range(130):  # more than one API page (100)
        RunCostFactory.create(
            team=team, run_id=f"r{i:03d}", cost=Decimal(i) + Decimal("0.123456789012")
        )
    RunCostFactory.create(team=other_team, run_id="speech-run")
    RunCostFactory.create(team=team, run_id="serve/chat", category=Category.INFERENCE)
    response = finance_client.get(
        "/api/v1/runs/", {"month": "2025-09", "team": "vision", "ordering": "cost", "format": "csv"}
    )
    rows = _csv(response)
    assert 'filename="api-run.csv"' in response["Content-Disposition"]
    assert [r["run_id"] for r in rows] == [f"r{i:03d}" for i in range(130)]
    # Money keeps every stored place, as in the JSON.
    assert rows[7]["cost"] == "7.123456789012"
    assert rows[7]["team"] == "vision"
    assert rows[7]["month"] == "2025-09"


def test_runs_csv_neutralises_a_formula_in_a_run_id(finance_client: Client, team: Team) -> None:
    RunCostFactory.create(
        team=team, run_id='=HYPERLINK("http://evil")', wasted_cost=Decimal("-1.5")
    )
    rows = _csv(finance_client.get("/api/v1/runs/", {"month": "2025-09", "format": "csv"}))
    assert rows[0]["run_id"] == '\'=HYPERLINK("http://evil")'
    assert rows[0]["wasted_cost"] == "-1.500000000000"


def test_lead_csv_holds_only_their_teams(lead_client: Client, team: Team, other_team: Team) -> None:
    RunCostFactory.create(team=team, run_id="mine")
    RunCostFactory.create(team=other_team, run_id="theirs")
    rows = _csv(lead_client.get("/api/v1/runs/", {"month": "2025-09", "format": "csv"}))
    assert [r["run_id"] for r in rows] == ["mine"]
    rows = _csv(
        lead_client.get("/api/v1/runs/", {"month": "2025-09", "team": "speech", "format": "csv"})
    )
    assert rows == []


def test_costs_csv_is_one_row_per_series_and_day(
    finance_client: Client, team: Team, other_team: Team
) -> None:
    TeamDailyCostFactory.create(team=team, day=dt.date(2025, 9, 2), amount=Decimal("1.5"))
    TeamDailyCostFactory.create(team=team, day=dt.date(2025, 9, 3), amount=Decimal("2"))
    TeamDailyCostFactory.create(team=other_team, day=dt.date(2025, 9, 2), amount=Decimal("7"))
    rows = _csv(
        finance_client.get(
            "/api/v1/costs/", {"month": "2025-09", "group_by": "team", "format": "csv"}
        )
    )
    assert [(r["day"], r["team"], r["name"], r["currency"], r["amount"]) for r in rows] == [
        ("2025-09-02", "speech", "Speech", "USD", "7.000000000000"),
        ("2025-09-02", "vision", "Vision", "USD", "1.500000000000"),
        ("2025-09-03", "vision", "Vision", "USD", "2.000000000000"),
    ]
    # ?team= narrows to one team (the team page's daily table).
    rows = _csv(
        finance_client.get(
            "/api/v1/costs/",
            {"month": "2025-09", "group_by": "category", "team": "speech", "format": "csv"},
        )
    )
    assert [(r["category"], r["amount"]) for r in rows] == [("training", "7.000000000000")]


def test_import_batches_csv_flattens_lists(finance_client: Client) -> None:
    ImportBatchFactory.create(source="=cmd", billing_periods=["2025-08", "2025-09"])
    rows = _csv(finance_client.get("/api/v1/import-batches/", {"format": "csv"}))
    assert rows[0]["source"] == "'=cmd"
    assert rows[0]["billing_periods"] == "2025-08; 2025-09"


def test_pages_link_their_tables_to_the_csv(finance_client: Client, team: Team) -> None:
    RunCostFactory.create(team=team, run_id="r1")
    TeamDailyCostFactory.create(team=team)
    html = finance_client.get(
        reverse("web:runs"), {"month": "2025-09", "team": "vision", "q": "r"}
    ).content.decode()
    link = match(r'href="([^"]+)" download data-testid="csv-runs"', html).group(1)
    link = link.replace("&amp;", "&")
    assert link.startswith("/api/v1/runs/?")
    assert "team=vision" in link
    assert "q=r" in link
    assert [r["run_id"] for r in _csv(finance_client.get(link))] == ["r1"]
    html = finance_client.get(
        reverse("web:team", args=["vision"]), {"month": "2025-09"}
    ).content.decode()
    for name in ("csv-team-runs", "csv-team-daily"):
        link = match(rf'href="([^"]+)" download data-testid="{name}"', html).group(1)
        assert _csv(finance_client.get(link.replace("&amp;", "&")))
    html = finance_client.get(reverse("web:overview"), {"month": "2025-09"}).content.decode()
    for name in ("csv-cost-over-time", "csv-team-table", "csv-provider-table"):
        link = match(rf'href="([^"]+)" download data-testid="{name}"', html).group(1)
        assert _csv(finance_client.get(link.replace("&amp;", "&")))
