"""Stored budget evaluations: the pipeline's budgets step (and a budget's save) keeps each
budget's newest status, forecast, band and as-of per period; the overview's "budgets at risk"
and the team page read those rows, so their queries do not grow with the number of budgets."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from pytest_django import DjangoCaptureOnCommitCallbacks

from finops.budgets.models import Budget, BudgetEvaluation
from finops.budgets.services import budget_create, budget_update, budgets_evaluate_active
from finops.budgets.tasks import evaluate_budgets_for_month
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db
SEP_1, SEP_10 = date(2025, 9, 1), date(2025, 9, 10)
COMMON = {"period": "month", "currency": "USD", "thresholds": [], "forecast_thresholds": []}


@pytest.fixture
def ten_days(team: Team) -> None:
    """Vision spends 100 a day on 1 to 10 September: actual 1,000 as of the 10th, and a flat
    forecast of 100 a day for the 20 days left, 3,000 at the month's end."""
    ledger_days(team=team, first=SEP_1, amounts=[100] * 10)


def _budget(team: Team, name: str, amount: int) -> Budget:
    return Budget.objects.create(name=name, team=team, amount=Decimal(amount), **COMMON)


def test_budgets_step_stores_status_forecast_band_and_as_of(team: Team, ten_days: None) -> None:
    roomy, tight = _budget(team, "roomy", 5000), _budget(team, "tight", 2000)
    over = _budget(team, "over", 900)
    evaluate_budgets_for_month("2025-09")
    rows = {e.budget_id: e for e in BudgetEvaluation.objects.all()}
    assert len(rows) == 3
    for budget, status in ((roomy, "ok"), (tight, "at_risk"), (over, "over")):
        row = rows[budget.pk]
        assert row.status == status, budget.name
        assert (row.period_start, row.period_end) == (SEP_1, date(2025, 9, 30))
        assert row.as_of == SEP_10
        assert row.currency == "USD"
        assert row.actual == Decimal("1000.00")
        assert row.forecast == Decimal("3000.00")
        assert row.forecast_low <= row.forecast <= row.forecast_high


def test_a_rerun_replaces_the_row_and_an_older_as_of_never_does(team: Team, ten_days: None) -> None:
    budget = _budget(team, "tight", 2000)
    evaluate_budgets_for_month("2025-09")
    evaluate_budgets_for_month("2025-09")
    assert BudgetEvaluation.objects.filter(budget=budget).count() == 1
    # An evaluation as of an earlier day (check_budgets --as-of) keeps the newer one.
    budgets_evaluate_active(as_of=date(2025, 9, 5))
    assert BudgetEvaluation.objects.get(budget=budget).as_of == SEP_10
    # Two more days of bill: the same row moves on to the 12th.
    ledger_days(team=team, first=date(2025, 9, 11), amounts=[100, 100])
    evaluate_budgets_for_month("2025-09")
    row = BudgetEvaluation.objects.get(budget=budget)
    assert row.as_of == date(2025, 9, 12)
    assert row.actual == Decimal("1200.00")


def test_saving_a_budget_stores_its_status_and_an_edit_restates_it(
    team: Team,
    ten_days: None,
    finance_user: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        budget = budget_create(
            user=finance_user,
            data={"name": "Vision", "team": team.slug, "amount": "5000", "currency": "USD"},
        )
    row = BudgetEvaluation.objects.get(budget=budget)
    assert (row.status, row.as_of, row.actual) == ("ok", SEP_10, Decimal("1000.00"))
    # Below the 1,000 spent: over at once, before any new forecast runs.
    with django_capture_on_commit_callbacks(execute=False):
        budget_update(user=finance_user, budget=budget, data={"amount": "800"})
    assert BudgetEvaluation.objects.get(budget=budget).status == "over"
    # Another period kind: the month row is no longer the budget's.
    with django_capture_on_commit_callbacks(execute=False):
        budget_update(user=finance_user, budget=budget, data={"period": "quarter"})
    assert not BudgetEvaluation.objects.filter(budget=budget).exists()


def _overview_queries(client: Client) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("web:overview"), {"month": "2025-09"})
    assert response.status_code == 200
    return len(queries), response.content.decode()


def test_overview_queries_do_not_grow_with_the_number_of_budgets(
    client: Client, finance_user: User, team: Team, ten_days: None
) -> None:
    client.force_login(finance_user)
    _budget(team, "Vision tight 0", 2000)
    evaluate_budgets_for_month("2025-09")
    client.get(reverse("web:overview"), {"month": "2025-09"})  # warm the session
    few, html = _overview_queries(client)
    assert "Vision tight 0" in html

    for i in range(1, 31):
        other = TeamFactory.create(slug=f"budgeted-{i}")
        ledger_days(team=other, first=SEP_1, amounts=[10] * 10)
        _budget(team, f"Vision tight {i}", 2000)
        _budget(other, f"Other roomy {i}", 10**6)
    evaluate_budgets_for_month("2025-09")
    many, html = _overview_queries(client)
    assert many == few
    assert all(f"Vision tight {i}" in html for i in range(31))
    assert "Other roomy" not in html


def test_team_page_reads_stored_rows_and_says_which_are_not_evaluated(
    client: Client, finance_user: User, team: Team, ten_days: None
) -> None:
    client.force_login(finance_user)
    _budget(team, "Vision tight", 2000)
    evaluate_budgets_for_month("2025-09")
    _budget(team, "Vision new", 4000)  # created behind the services' back: never evaluated
    html = client.get(reverse("web:team", args=[team.slug]), {"month": "2025-09"}).content
    text = html.decode()
    assert "Vision tight" in text
    assert "3,000.00 USD" in text
    assert "10 Sep 2025" in text
    assert 'data-testid="budget-pending"' in text
    assert "Vision new" in text
    assert "Not evaluated for this month yet" in text
