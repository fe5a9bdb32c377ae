"""The overview as a dashboard: cost over time (daily, stacked by team or category, 3 to 12
months), this month against last per team, idle and unallocated as shares of the bill, the
alerts panel only with the apps that fill it, each table once when there is one currency."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from finops.attribution.models import Category, TeamDailyCost
from finops.budgets.models import Budget
from finops.budgets.tasks import evaluate_budgets_for_month
from finops.core.months import month_add
from finops.currency.models import FxRate
from finops.org.models import Team
from tests.client_types import Response
from tests.factories import TeamDailyCostFactory, TeamFactory
from tests.page_tables import table_rows
from tests.query_budgets import ENERGY_CARD_QUERIES, IDLE_ADVICE_QUERIES, IDLE_SHOWBACK_QUERIES

SEP, AUG, JUL = dt.date(2025, 9, 1), dt.date(2025, 8, 1), dt.date(2025, 7, 1)


def _text(response: Response) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r"\s+", " ", response.content.decode())


def _cost(
    team: Team | None, period: dt.date, day: dt.date, amount: str,
    category: str = Category.TRAINING, currency: str = "USD",
) -> TeamDailyCost:  # fmt: skip
    return TeamDailyCostFactory.create(
        team=team,
        billing_period=period,
        day=day,
        amount=Decimal(amount),
        category=category,
        billing_currency=currency,
    )


@pytest.fixture
def history(team: Team, other_team: Team) -> None:
    """Vision and Speech over July to September; a platform idle line in September."""
    _cost(team, JUL, dt.date(2025, 7, 10), "10")
    _cost(team, AUG, dt.date(2025, 8, 5), "100")
    _cost(team, SEP, dt.date(2025, 9, 2), "120")
    _cost(team, SEP, dt.date(2025, 9, 2), "30", category=Category.IDLE)
    _cost(other_team, SEP, dt.date(2025, 9, 2), "20", category=Category.INFERENCE)
    _cost(other_team, SEP, dt.date(2025, 9, 3), "20")
    _cost(None, SEP, dt.date(2025, 9, 3), "10", category=Category.UNALLOCATED)


def test_month_add_crosses_years() -> None:
    assert month_add(dt.date(2025, 1, 1), -1) == dt.date(2024, 12, 1)
    assert month_add(dt.date(2025, 11, 1), 3) == dt.date(2026, 2, 1)


def test_cost_over_time_by_team(finance_client: Client, history: None) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09", "months": "3"}))
    rows = table_rows(html, "cost-over-time")
    # Teams by name, the no-team bucket last; one row per day with cost, every month in range.
    assert rows[0] == ["Day", "Speech", "Vision", "No team (platform)"]
    assert rows[1:] == [
        ["2025-07-10", "0.00", "10.00", "0.00"],
        ["2025-08-05", "0.00", "100.00", "0.00"],
        ["2025-09-02", "20.00", "150.00", "0.00"],
        ["2025-09-03", "20.00", "0.00", "10.00"],
    ]
    assert 'data-chart="cost-over-time" data-chart-type="bar" data-stacked' in html


def test_cost_over_time_by_category_and_window(finance_client: Client, history: None) -> None:
    html = _text(
        finance_client.get(
            reverse("web:overview"), {"month": "2025-09", "months": "3", "by": "category"}
        )
    )
    rows = table_rows(html, "cost-over-time")
    assert rows[0] == ["Day", "training", "inference", "idle", "unallocated"]
    assert rows[3] == ["2025-09-02", "120.00", "20.00", "30.00", "0.00"]
    # Fewer than 3 months asked: 3 (July is in); the selected month ends the window.
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-08", "months": "1"}))
    days = [r[0] for r in table_rows(html, "cost-over-time")[1:]]
    assert days == ["2025-07-10", "2025-08-05"]


def test_months_over_twelve_is_twelve_and_not_a_number_is_400(
    finance_client: Client, history: None
) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09", "months": "40"}))
    assert "October 2024 to September 2025" in html
    response = finance_client.get(reverse("web:overview"), {"months": "six"})
    assert response.status_code == 400
    assert "months must be a whole number" in response.content.decode()


def test_this_month_against_last_per_team(finance_client: Client, history: None) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert "September 2025 against August 2025 (USD)" in html
    rows = {r[0]: r[1:] for r in table_rows(html, "month-change")[1:]}
    # Vision: 100 in August, 120 + 30 in September: +50, +50 %.
    assert rows["Vision"] == ["100.00", "150.00", "+50.00", "+50.0 %"]
    # Speech had nothing in August: the change is its whole cost, no percentage.
    assert rows["Speech"] == ["0.00", "40.00", "+40.00", "\u2013"]
    assert rows["No team (platform)"] == ["0.00", "10.00", "+10.00", "\u2013"]


def test_idle_and_unallocated_as_shares_of_the_bill(finance_client: Client, history: None) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    # September: 120 + 30 + 20 + 20 + 10 = 200; idle 30 = 15 %, unallocated 10 = 5 %.
    assert 'data-testid="idle-share">15.0 %<' in html
    assert 'data-testid="unallocated-share">5.0 %<' in html


def test_lead_dashboard_holds_only_their_team(lead_client: Client, history: None) -> None:
    html = _text(lead_client.get(reverse("web:overview"), {"month": "2025-09", "months": "3"}))
    assert table_rows(html, "cost-over-time")[0] == ["Day", "Vision"]
    assert [r[0] for r in table_rows(html, "month-change")[1:]] == ["Vision"]
    assert "Speech" not in html
    assert "No team (platform)" not in html
    # The lead's teams' cost: 150, idle 30 of it.
    assert "Idle share of your teams' cost" in html
    assert 'data-testid="idle-share">20.0 %<' in html
    # Unallocated cost is no team's: not shown as the lead's 0.00 / 0.0 % (h-pages).
    assert 'data-testid="unallocated-share"' not in html
    assert "Unallocated (USD)" not in html


def test_one_currency_shows_each_table_once(finance_client: Client, history: None) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert 'data-testid="reporting-table"' not in html
    assert html.count('data-testid="team-table"') == 1
    assert "(native currencies)" not in html


def test_two_currencies_convert_the_dashboard_per_day(finance_client: Client, team: Team) -> None:
    _cost(team, SEP, dt.date(2025, 9, 2), "100", currency="EUR")
    _cost(team, SEP, dt.date(2025, 9, 2), "5")
    FxRate.objects.create(
        date=dt.date(2025, 9, 1), from_currency="EUR", to_currency="USD", rate=Decimal("1.1")
    )
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert 'data-testid="reporting-table"' in html
    assert "Cost over time (USD, converted per day)" in html
    # 100 EUR x 1.1 + 5 USD.
    assert table_rows(html, "cost-over-time")[1] == ["2025-09-02", "115.00"]


def test_missing_rate_shows_the_default_currency_alone(finance_client: Client, team: Team) -> None:
    _cost(team, SEP, dt.date(2025, 9, 2), "100", currency="EUR")
    _cost(team, SEP, dt.date(2025, 9, 2), "5")
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert 'data-testid="dashboard-fx-error"' in html
    assert table_rows(html, "cost-over-time")[1] == ["2025-09-02", "5.00"]


def test_alerts_panel_lists_budgets_at_risk(
    finance_client: Client, history: None, team: Team
) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert 'data-testid="dashboard-alerts"' in html
    assert "No budget is over or forecast to go over." in html
    # Far below what the team spent in September: over budget, so at risk.
    Budget.objects.create(
        name="Vision tiny", team=team, period="month", amount=Decimal("0.01"), currency="USD"
    )
    Budget.objects.create(
        name="Vision huge", team=team, period="month", amount=Decimal("1e9"), currency="USD"
    )
    # The panel reads the statuses the pipeline's budgets step stores.
    evaluate_budgets_for_month("2025-09")
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert "Vision tiny" in html
    assert "Vision huge" not in html


def test_overview_queries_do_not_grow_with_teams_or_months(
    finance_client: Client, history: None, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    for i in range(30):
        extra = TeamFactory.create(slug=f"many-{i}")
        for period in (JUL, AUG, SEP):
            _cost(extra, period, period.replace(day=9), str(i))
    with django_assert_max_num_queries(OVERVIEW_QUERIES):
        html = _text(
            finance_client.get(reverse("web:overview"), {"month": "2025-09", "months": "12"})
        )
    assert "Many 29" in html


# Session, user, months with data (2), profile, the month's overview (3: teams x categories,
# providers, the reporting-currency rows), the dashboard (1); one more for FX rates when several
# currencies are converted (none here); the waste card (its stored months, then the rollups of
# the months not stored: 2 with no runs); the idle showback (tests/query_budgets.py) and its
# advice; the energy card.
OVERVIEW_QUERIES = (
    14 + IDLE_SHOWBACK_QUERIES + IDLE_ADVICE_QUERIES + ENERGY_CARD_QUERIES
)  # + anomalies, budgets at risk


def test_dashboard_sums_stay_exact_past_28_digits(team: Team) -> None:
    # The sums of one currency are Decimals (no Fraction per row): exact past the default
    # context's 28 digits (a month of 9,999,999,999,999,999.999999999999 + 1.000000000002 on
    # another day is 29 digits; 28 would drop the last 1).
    from finops.attribution.selectors.dashboard import overview_dashboard

    _cost(team, SEP, dt.date(2025, 9, 1), "9999999999999999.999999999999")
    _cost(team, SEP, dt.date(2025, 9, 2), "1.000000000002")
    dashboard = overview_dashboard(
        month=SEP, months=3, group_by="category", teams=Team.objects.all(), include_unowned=True
    )
    (change,) = dashboard.changes
    assert change.this_month == Decimal("10000000000000001.000000000001")
    assert dashboard.shares is not None
    assert dashboard.shares.total == change.this_month
    assert [d.total for d in dashboard.days] == [
        Decimal("9999999999999999.999999999999"),
        Decimal("1.000000000002"),
    ]
