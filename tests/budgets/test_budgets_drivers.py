"""A budget's biggest drivers (finops.budgets.drivers): runs, services and endpoints of the
period to as_of in the budget's currency. Rows already in it are summed per key in the
database; rows in another currency are converted at each day's rate (issue 29 grouped the
first per key only, not per key and day). Hand-worked figures below."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from finops.attribution.models import AllocatedCost, Category
from finops.budgets.drivers import budget_drivers
from finops.budgets.models import Budget
from finops.budgets.selectors import budget_period
from finops.currency.models import FxRate
from finops.org.models import Team

pytestmark = pytest.mark.django_db

SEPTEMBER = date(2025, 9, 1)
AS_OF = date(2025, 9, 10)


def cost(team: Team, dom: int, run_id: str, service: str, amount: str, currency: str) -> None:
    AllocatedCost.objects.create(
        billing_period=SEPTEMBER, day=SEPTEMBER.replace(day=dom), team=team,
        category=Category.TRAINING, provider_name="AWS", billing_currency=currency,
        amount=Decimal(amount), run_id=run_id, service_name=service,
    )  # fmt: skip


def test_drivers_sum_the_budget_currency_exactly_and_convert_the_rest_per_day() -> None:
    team = Team.objects.create(slug="vision", name="Vision")
    budget = Budget.objects.create(
        name="Vision monthly", team=team, period="month", amount=1000, currency="USD",
        thresholds=[100], forecast_thresholds=[100],
    )  # fmt: skip
    for dom, rate in ((1, "1.1"), (2, "1.2")):
        FxRate.objects.create(
            date=SEPTEMBER.replace(day=dom), from_currency="EUR", to_currency="USD",
            rate=Decimal(rate),
        )  # fmt: skip
    # run-a, USD: 10.000000000004 + 20.000000000004 + 30 = 60.000000000008 -> 60.00
    cost(team, 1, "run-a", "EC2", "10.000000000004", "USD")
    cost(team, 2, "run-a", "EC2", "20.000000000004", "USD")
    cost(team, 3, "run-a", "EC2", "30", "USD")
    # run-b: 10 EUR x 1.1 (day 1) + 10 EUR x 1.2 (day 2) + 5 USD = 11 + 12 + 5 = 28.00
    cost(team, 1, "run-b", "SageMaker", "10", "EUR")
    cost(team, 2, "run-b", "SageMaker", "10", "EUR")
    cost(team, 3, "run-b", "SageMaker", "5", "USD")
    # run-c: 0.004 + 0.004 = 0.008 -> 0.01 (the sum rounded, not each day's 0.00)
    cost(team, 4, "run-c", "EC2", "0.004", "USD")
    cost(team, 5, "run-c", "EC2", "0.004", "USD")
    # After as_of: not in the period to date.
    cost(team, 11, "run-d", "EC2", "1000", "USD")

    period = budget_period(budget=budget, day=AS_OF)
    with CaptureQueriesContext(connection) as queries:
        drivers = budget_drivers(budget=budget, period=period, as_of=AS_OF)

    runs = [(d.key, d.amount) for d in drivers["runs"]]
    assert runs == [("run-a", Decimal("60.00")), ("run-b", Decimal("28.00")),
                    ("run-c", Decimal("0.01"))]  # fmt: skip
    services = [(d.key, d.amount) for d in drivers["services"]]
    # EC2: 60.000000000008 + 0.008 = 60.008000000008 -> 60.01; SageMaker 28.00.
    assert services == [("EC2", Decimal("60.01")), ("SageMaker", Decimal("28.00"))]
    assert drivers["endpoints"] == []
    # One ledger query per dimension, one for the EUR rates of the two that have EUR rows.
    assert len(queries.captured_queries) <= 3 + 2


def test_drivers_in_the_budget_currency_only_are_ranked_by_amount_then_key() -> None:
    team = Team.objects.create(slug="vision", name="Vision")
    budget = Budget.objects.create(
        name="Vision monthly", team=team, period="month", amount=1000, currency="USD",
        thresholds=[100], forecast_thresholds=[100],
    )  # fmt: skip
    cost(team, 1, "run-b", "EC2", "5", "USD")
    cost(team, 2, "run-a", "EC2", "2.5", "USD")
    cost(team, 3, "run-a", "EC2", "2.5", "USD")
    cost(team, 4, "run-c", "EC2", "7.004999999999", "USD")
    for n in range(6):  # more runs than DRIVERS: the smallest are left out
        cost(team, 5, f"run-z{n}", "EC2", "1", "USD")

    drivers = budget_drivers(budget=budget, period=budget_period(budget=budget, day=AS_OF),
                             as_of=AS_OF)  # fmt: skip

    # run-c 7.004999999999 -> 7.00; run-a 2.5 + 2.5 = 5.00 ties run-b 5.00: by run id.
    assert [(d.key, d.amount) for d in drivers["runs"]] == [
        ("run-c", Decimal("7.00")), ("run-a", Decimal("5.00")), ("run-b", Decimal("5.00")),
        ("run-z0", Decimal("1.00")), ("run-z1", Decimal("1.00")),
    ]  # fmt: skip
    assert [(d.key, d.amount) for d in drivers["services"]] == [("EC2", Decimal("23.00"))]
