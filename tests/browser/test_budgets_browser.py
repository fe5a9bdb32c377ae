"""Budget pages in a real headless Chromium: the list, the burn-down chart drawn from its table
by static/finops-charts.js, and the create form's field errors."""

from __future__ import annotations

from datetime import date

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.budgets.models import Budget
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.chromium import _body, _login, _wait_for_text

pytestmark = pytest.mark.browser


@pytest.fixture
def vision_budget(team: Team) -> Budget:
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 30)
    return Budget.objects.create(
        name="Vision monthly", team=team, period="month", amount=2000, currency="USD",
        thresholds=[50, 80, 100], forecast_thresholds=[100], recipients=[],
    )  # fmt: skip


def test_finance_sees_list_chart_and_form_errors(
    browser: WebDriver, live_server: LiveServer, vision_budget: Budget, finance_user: User
) -> None:
    from selenium.webdriver.common.by import By

    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(f"{live_server.url}/budgets/?as_of=2025-09-10")
    _wait_for_text(browser, "Vision monthly")
    assert "50.00 %" in _body(browser)
    assert "3,000.00 USD" in _body(browser)

    browser.find_element(By.LINK_TEXT, "Vision monthly").click()
    _wait_for_text(browser, "Burn-down")
    drawn = browser.execute_script(
        "var c = document.querySelector('canvas[data-chart=\"burn-down\"]');"
        "var chart = window.Chart && Chart.getChart(c);"
        "return chart ? chart.data.datasets.map(function (d) { return d.label; }) : null;"
    )
    assert drawn == ["Actual", "Forecast", "Forecast p10", "Forecast p90", "Budget",
                     "50 %", "80 %", "100 %"]  # fmt: skip

    browser.get(f"{live_server.url}/budgets/new/")
    browser.find_element(By.ID, "id_name").send_keys("Broken")
    browser.find_element(By.ID, "id_amount").send_keys("0")
    browser.find_element(By.CSS_SELECTOR, '[data-testid="budget-save"]').click()
    _wait_for_text(browser, "greater than zero")
    assert Budget.objects.count() == 1


def test_lead_does_not_see_other_teams_budgets(
    browser: WebDriver,
    live_server: LiveServer,
    vision_budget: Budget,
    lead_user: User,
    other_team: Team,
) -> None:
    Budget.objects.create(name="Speech secret", team=other_team, period="month", amount=10,
                          currency="USD", thresholds=[100], forecast_thresholds=[])  # fmt: skip
    _login(browser, live_server.url, "lead", "lead-password-123")
    browser.get(f"{live_server.url}/budgets/?as_of=2025-09-10")
    _wait_for_text(browser, "Vision monthly")
    assert "Speech secret" not in _body(browser)
