"""What a budget counts: a team's ledger, a tag filter's line items, one provider, the whole
organisation; recurring charges counted once on their day (and again in the later months of a
quarter), never extrapolated. Line items go through attribution, as in use."""

from __future__ import annotations

import datetime as dt
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pytest_django import Settings

from billing_ingest.models import CostLineItem, ImportBatch
from finops.attribution.services import attribution_month_run
from finops.budgets.models import Budget
from finops.budgets.selectors import budget_status
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.factories import CostLineItemFactory, ImportBatchFactory

pytestmark = pytest.mark.django_db
UTC = dt.UTC
SEPTEMBER = date(2025, 9, 1)


def _line(
    batch: ImportBatch, day: date, cost: str, tags: dict[str, str], *, category: str = "Usage",
    days: int = 1,
) -> CostLineItem:  # fmt: skip
    start = dt.datetime.combine(day, dt.time(), tzinfo=UTC)
    return CostLineItemFactory.create(
        batch=batch, billing_period=SEPTEMBER, charge_category=category,
        charge_period_start=start, charge_period_end=start + timedelta(days=days),
        effective_cost=Decimal(cost), billed_cost=Decimal(cost), tags=tags,
    )  # fmt: skip


@pytest.fixture
def vision_with_fee(team: Team) -> Team:
    batch = ImportBatchFactory.create(source="aws")
    for i in range(30):
        _line(batch, SEPTEMBER + timedelta(days=i), "100", {"team": "vision"})
    # A support fee charged on the 1st for the month: a Purchase, booked on its one day.
    _line(batch, SEPTEMBER, "600", {"team": "vision"}, category="Purchase")
    attribution_month_run(month=SEPTEMBER)
    return team


def _budget(team: Team | None, **kwargs: Any) -> Budget:
    values: dict[str, Any] = {"name": "b", "team": team, "period": "month", "amount": Decimal(5000),
              "currency": "USD", "thresholds": [100], "forecast_thresholds": [100]}  # fmt: skip
    values.update(kwargs)
    return Budget.objects.create(**values)


def test_a_recurring_fee_counts_once_and_is_not_extrapolated(vision_with_fee: Team) -> None:
    status = budget_status(budget=_budget(vision_with_fee), as_of=date(2025, 9, 10))
    # Booked: 10 x 100 + the 600 fee. Usage history (fee left out) is 100 a day, so the other
    # 20 days add 2000; the naive run-rate would have said 1600 / 10 x 30 = 4800.
    assert status.actual == Decimal(1600)
    assert status.forecast == Decimal(3600)


def test_a_quarter_repeats_the_fee_in_its_later_months(
    vision_with_fee: Team, settings: Settings
) -> None:
    settings.FINOPS_FISCAL_YEAR_START_MONTH = 9  # quarter: September to November
    status = budget_status(
        budget=_budget(vision_with_fee, period="quarter"), as_of=date(2025, 9, 10)
    )
    assert (status.period.start, status.period.end) == (SEPTEMBER, date(2025, 11, 30))
    # 1600 + 20 x 100 (September) + 61 x 100 (October, November) + the fee on 1 Oct and 1 Nov.
    assert status.forecast == Decimal(1600 + 2000 + 6100 + 1200)


def test_a_tag_filter_counts_only_the_tagged_line_items(team: Team) -> None:
    batch = ImportBatchFactory.create(source="aws")
    for i in range(5):
        _line(batch, SEPTEMBER + timedelta(days=i), "100", {"team": "vision"})
        _line(batch, SEPTEMBER + timedelta(days=i), "7", {"team": "vision", "project": "seg"})
    attribution_month_run(month=SEPTEMBER)
    tagged = _budget(team, tag_key="project", tag_value="seg")
    whole = _budget(team)
    assert budget_status(budget=tagged, as_of=date(2025, 9, 5)).actual == Decimal(35)
    assert budget_status(budget=whole, as_of=date(2025, 9, 5)).actual == Decimal(535)


def test_provider_and_organisation_scopes(team: Team, other_team: Team) -> None:
    ledger_days(team=team, first=SEPTEMBER, amounts=[100] * 3, provider="AWS")
    ledger_days(team=other_team, first=SEPTEMBER, amounts=[10] * 3, provider="Google Cloud")
    ledger_days(team=None, first=SEPTEMBER, amounts=[1] * 3, provider="AWS")
    as_of = date(2025, 9, 3)
    aws = _budget(None, provider_name="AWS")
    org = _budget(None)
    speech = _budget(other_team)
    assert budget_status(budget=aws, as_of=as_of).actual == Decimal(303)
    assert budget_status(budget=org, as_of=as_of).actual == Decimal(333)
    assert budget_status(budget=speech, as_of=as_of).actual == Decimal(30)


def test_days_after_as_of_and_outside_the_period_do_not_count(team: Team) -> None:
    ledger_days(team=team, first=date(2025, 8, 25), amounts=[100] * 20)  # 25 Aug .. 13 Sep
    status = budget_status(budget=_budget(team), as_of=date(2025, 9, 5))
    assert status.actual == Decimal(500)
    # August counts as trailing history for the forecast: 100 a day for the 25 days left.
    assert status.forecast == Decimal(500 + 25 * 100)


def test_a_missing_fx_rate_is_an_error_not_a_guess(team: Team) -> None:
    ledger_days(team=team, first=SEPTEMBER, amounts=[100] * 3, currency="EUR")
    status = budget_status(budget=_budget(team), as_of=date(2025, 9, 3))
    assert "EUR" in status.error
    assert "USD" in status.error
