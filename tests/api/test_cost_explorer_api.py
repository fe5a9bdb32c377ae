"""The cost explorer through /api/v1/costs/ (DESIGN 10): any dimension, from the ledger (team,
category, provider, account, service) or the bill (region, instance type, tag:KEY, invoiced
cost), on a small hand-made month whose figures are worked out below."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from finops.attribution.models import Category
from finops.currency.models import FxRate
from finops.org.models import Team
from tests.factories import AllocatedCostFactory, CostLineItemFactory, ImportBatchFactory

UTC = dt.UTC


def at(day: int, hour: int = 0, month: int = 9) -> dt.datetime:
    return dt.datetime(2025, month, day, hour, tzinfo=UTC)


def money(text: str) -> str:
    return f"{Decimal(text):.12f}"


@pytest.fixture
def bill(team: Team, other_team: Team) -> None:
    """September 2025, one settled batch; EUR->USD 1.1 from 1 Sep.

    1. AWS a-1 EC2 us-east-1 p5.48xlarge {project: llm}: 1 Sep 00-01h, amortised 100, invoiced 120.
    2. AWS a-1 EC2 us-west-2 p4d.24xlarge {project: asr}: 1 Sep 12h -> 3 Sep 12h (48 h),
       amortised 48 (12 on the 1st, 24 on the 2nd, 12 on the 3rd), invoiced 0.
    3. GCP b-1 Compute Engine europe-west4 a3-highgpu-8g, no tag: 2 Sep 00-01h, 50 EUR
       both ways = 55 USD.
    4. AWS a-1 Savings Plans, no region: 1 Sep -> 1 Oct, amortised 0, invoiced 300
       (10 a day for 30 days).
    Ledger (amortised): Vision EC2 70 + Speech EC2 30 on 1 Sep (AWS), Vision Compute Engine
    50 EUR on 2 Sep (GCP), 48 unallocated EC2 on 1 Sep (no team).
    """
    batch = ImportBatchFactory.create(source="bill")
    aws = {"batch": batch, "provider_name": "AWS", "billing_account_id": "a-1"}
    CostLineItemFactory.create(
        **aws, service_name="EC2", region_id="us-east-1", x_instance_type="p5.48xlarge",
        tags={"project": "llm", "team": "vision"}, charge_period_start=at(1),
        charge_period_end=at(1, 1), effective_cost=Decimal("100"), billed_cost=Decimal("120"),
    )  # fmt: skip
    CostLineItemFactory.create(
        **aws, service_name="EC2", region_id="us-west-2", x_instance_type="p4d.24xlarge",
        tags={"project": "asr"}, charge_period_start=at(1, 12), charge_period_end=at(3, 12),
        effective_cost=Decimal("48"), billed_cost=Decimal("0"),
    )  # fmt: skip
    CostLineItemFactory.create(
        batch=batch, provider_name="GCP", billing_account_id="b-1",
        service_name="Compute Engine", region_id="europe-west4", x_instance_type="a3-highgpu-8g",
        charge_period_start=at(2), charge_period_end=at(2, 1), effective_cost=Decimal("50"),
        billed_cost=Decimal("50"), billing_currency="EUR",
    )  # fmt: skip
    CostLineItemFactory.create(
        **aws, service_name="Savings Plans", charge_category="Purchase",
        charge_period_start=at(1), charge_period_end=at(1, month=10),
        effective_cost=Decimal("0"), billed_cost=Decimal("300"),
    )  # fmt: skip
    FxRate.objects.create(
        date=dt.date(2025, 9, 1), from_currency="EUR", to_currency="USD", rate=Decimal("1.1")
    )
    ledger: dict[str, Any] = {"provider_name": "AWS", "billing_account_id": "a-1",
                              "service_name": "EC2", "day": dt.date(2025, 9, 1)}  # fmt: skip
    AllocatedCostFactory.create(**ledger, team=team, amount=Decimal("70"))
    AllocatedCostFactory.create(**ledger, team=other_team, amount=Decimal("30"))
    AllocatedCostFactory.create(
        **ledger, team=None, amount=Decimal("48"), category=Category.UNALLOCATED
    )
    AllocatedCostFactory.create(
        provider_name="GCP", billing_account_id="b-1", service_name="Compute Engine",
        day=dt.date(2025, 9, 2), team=team, amount=Decimal("50"), billing_currency="EUR",
    )  # fmt: skip


def _get(api: APIClient, **params: str) -> Any:
    response = api.get("/api/v1/costs/", params)
    assert response.status_code == 200, response.content
    return response.json()


def _series(body: Any) -> dict[str | None, tuple[str, list[tuple[str, str]]]]:
    return {
        s["key"]: (s["total"], [(p["day"], p["amount"]) for p in s["points"]])
        for s in body["series"]
    }


def test_group_by_region_amortised_month_report(finance_api: APIClient, bill: None) -> None:
    body = _get(finance_api, month="2025-09", group_by="region")
    assert body["group_by"] == "region"
    assert body["currency"] == "USD"
    # The purchase line has no amortised cost: no "(none)" region series.
    assert _series(body) == {
        "europe-west4": (money("55"), [("2025-09-02", money("55"))]),
        "us-east-1": (money("100"), [("2025-09-01", money("100"))]),
        "us-west-2": (
            money("48"),
            [("2025-09-01", money("12")), ("2025-09-02", money("24")),
             ("2025-09-03", money("12"))],
        ),
    }  # fmt: skip
    assert body["total"] == money("203")
    assert body["native_totals"] == [
        {"currency": "USD", "amount": money("148")},
        {"currency": "EUR", "amount": money("50")},
    ]


def test_invoiced_by_region_monthly(finance_api: APIClient, bill: None) -> None:
    points = _get(finance_api, month="2025-09", group_by="region", cost="invoiced",
                  interval="month")  # fmt: skip
    assert [(p["t"], p["region"], p["cost"]) for p in points] == [
        ("2025-09-01", "", money("300")),
        ("2025-09-01", "europe-west4", money("55")),
        ("2025-09-01", "us-east-1", money("120")),
    ]


def test_group_by_a_tag_key_daily(finance_api: APIClient, bill: None) -> None:
    points = _get(finance_api, month="2025-09", group_by="tag:project", interval="day")
    assert [(p["t"], p["tag:project"], p["cost"]) for p in points] == [
        ("2025-09-01", "asr", money("12")),
        ("2025-09-01", "llm", money("100")),
        ("2025-09-02", "asr", money("24")),
        ("2025-09-02", None, money("55")),
        ("2025-09-03", "asr", money("12")),
    ]
    body = _get(finance_api, month="2025-09", group_by="tag:project")
    assert {s["key"]: s["name"] for s in body["series"]}[None] == "(no project tag)"


def test_filters_on_tag_region_and_days(finance_api: APIClient, bill: None) -> None:
    points = _get(finance_api, month="2025-09", group_by="instance_type", tag="project=llm",
                  interval="month")  # fmt: skip
    assert [(p["instance_type"], p["cost"]) for p in points] == [("p5.48xlarge", money("100"))]
    points = _get(finance_api, since="2025-09-02", until="2025-09-02", group_by="service",
                  region="us-west-2", interval="day")  # fmt: skip
    # Only the 2nd's 24 hours of the 48-hour line.
    assert [(p["t"], p["service"], p["cost"]) for p in points] == [
        ("2025-09-02", "EC2", money("24"))
    ]


def test_ledger_dimensions_for_finance_and_lead(
    finance_api: APIClient, lead_api: APIClient, bill: None
) -> None:
    finance = _get(finance_api, month="2025-09", group_by="service", interval="month")
    assert [(p["service"], p["cost"]) for p in finance] == [
        ("Compute Engine", money("55")),
        ("EC2", money("148")),
    ]
    # The lead of Vision sees Vision's cost only: 70 EC2 and 50 EUR = 55 USD.
    lead = _get(lead_api, month="2025-09", group_by="service", interval="month")
    assert [(p["service"], p["cost"]) for p in lead] == [
        ("Compute Engine", money("55")),
        ("EC2", money("70")),
    ]
    by_team = _get(finance_api, month="2025-09", group_by="team", service="EC2",
                   interval="month")  # fmt: skip
    assert [(p["team"], p["cost"]) for p in by_team] == [
        ("speech", money("30")),
        ("vision", money("70")),
        (None, money("48")),
    ]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "region", "team": "vision"}, "team"),
        ({"group_by": "team", "cost": "invoiced"}, "team"),
        ({"group_by": "category", "tag": "project=llm"}, "category"),
        ({"group_by": "colour"}, "group_by"),
        ({"group_by": "tag:"}, "group_by"),
        ({"group_by": "region", "tag": "no-equals-sign"}, "tag"),
        ({"group_by": "region", "cost": "cash"}, "cost"),
    ],
)
def test_questions_that_cannot_be_answered_are_400(
    finance_api: APIClient, bill: None, params: dict[str, str], field: str
) -> None:
    response = finance_api.get("/api/v1/costs/", {"month": "2025-09", **params})
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_a_lead_cannot_read_the_bill(lead_api: APIClient, bill: None) -> None:
    response = lead_api.get("/api/v1/costs/", {"month": "2025-09", "group_by": "region"})
    assert response.status_code == 400
    assert "finance only" in str(response.json())


def test_csv_of_the_explorer(finance_api: APIClient, bill: None) -> None:
    response = finance_api.get(
        "/api/v1/costs/", {"month": "2025-09", "group_by": "region", "format": "csv"}
    )
    assert response.status_code == 200
    lines = response.content.decode().strip().splitlines()
    assert lines[0].split(",") == ["day", "region", "name", "currency", "amount"]
    assert f"2025-09-02,us-west-2,us-west-2,USD,{money('24')}" in lines


def test_spread_is_exact_to_the_microsecond() -> None:
    from fractions import Fraction

    from finops.attribution.selectors.explorer import _spread

    start = dt.datetime(2025, 9, 1, 12, 0, 0, 500000, tzinfo=UTC)
    parts = list(_spread(start, at(3, 12), Fraction(48)))
    assert [day.day for day, _ in parts] == [1, 2, 3]
    assert sum(part for _, part in parts) == 48
    # A reversed or empty charge period falls on its start day.
    assert list(_spread(at(2), at(1), Fraction(5))) == [(dt.date(2025, 9, 2), Fraction(5))]
