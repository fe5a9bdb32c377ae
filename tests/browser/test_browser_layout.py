"""What a finance user and a team lead see of the layout in a real headless Chromium (the
review of the demo's pages): one user label and the finance-only entries in the top bar, filter
forms inside the page, checkboxes beside their labels, budget bars of a readable width
(tests/browser/test_browser.py checks the endpoints' unit costs,
tests/pricing/test_pricing_pages.py the pricing charts)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.budgets.models import Budget
from finops.budgets.tasks import evaluate_budgets_for_month
from finops.org.models import Team
from tests.budget_data import ledger_days
from tests.chromium import _login, _wait_for_text
from tests.ui_screens import screenshot

pytestmark = pytest.mark.browser


def _nav(driver: WebDriver) -> list[str]:
    return cast(
        list[str],
        driver.execute_script(
            "return [...document.querySelectorAll('header nav a')].map(a => a.textContent.trim())"
        ),
    )


def _left(driver: WebDriver, selector: str) -> float:
    return cast(
        float,
        driver.execute_script(
            "return document.querySelector(arguments[0]).getBoundingClientRect().left", selector
        ),
    )


def test_top_bar_as_finance_and_as_a_lead(
    browser: WebDriver, live_server: LiveServer, finance_user: User, lead_user: User
) -> None:
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    assert "Pipeline" in _nav(driver)
    assert "Reconciliation" in _nav(driver)
    who = driver.execute_script("return document.querySelector('header .who').innerText")
    assert who.count("fin · finance") == 1, who  # once, not twice
    driver.find_element("link text", "Pipeline").click()
    _wait_for_text(driver, "After an import settles")

    driver.delete_all_cookies()
    _login(driver, live_server.url, "lead", "lead-password-123")
    assert "Pipeline" not in _nav(driver)
    assert "Imports" not in _nav(driver)
    who = driver.execute_script("return document.querySelector('header .who').innerText")
    assert who.count("lead · team lead") == 1, who


def test_anomaly_filters_and_token_ticks_sit_inside_the_page(
    browser: WebDriver, live_server: LiveServer, finance_user: User, team: Team
) -> None:
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(live_server.url + "/anomalies/")
    _wait_for_text(driver, "Cost anomalies")
    # The filters start where the page's heading starts, not off its left edge.
    assert _left(driver, "[data-testid=anomaly-filters]") >= _left(driver, "main h1") - 1
    assert _left(driver, "label[for=id_team]") >= _left(driver, "main h1") - 1
    screenshot(driver, "anomalies-filters")

    driver.get(live_server.url + "/account/tokens/")
    _wait_for_text(driver, "New token")
    widths = driver.execute_script(
        "return [...document.querySelectorAll('#token-form input[type=checkbox]')]"
        ".map(i => i.getBoundingClientRect().width)"
    )
    assert widths
    assert all(w < 40 for w in widths), widths  # not stretched across the card
    label = driver.execute_script(
        "var l = [...document.querySelectorAll('#token-form label')]"
        ".find(l => l.textContent.trim() === arguments[0]);"
        "var box = l.querySelector('input').getBoundingClientRect();"
        "var text = l.getBoundingClientRect();"
        "return Math.abs(box.top - text.top) < 12;",
        team.name,
    )
    assert label, "a team's checkbox sits on its label's line"
    screenshot(driver, "tokens-form")


def test_team_budget_bar_is_readable(
    browser: WebDriver, live_server: LiveServer, finance_user: User, team: Team
) -> None:
    ledger_days(team=team, first=date(2025, 9, 1), amounts=[100] * 10)
    Budget.objects.create(
        name="Vision tight", team=team, period="month", amount=Decimal(2000), currency="USD"
    )
    evaluate_budgets_for_month("2025-09")
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(f"{live_server.url}/teams/{team.slug}/?month=2025-09")
    _wait_for_text(driver, "Vision tight")
    width = driver.execute_script(
        "return document.querySelector('[data-testid=team-budgets] progress')"
        ".getBoundingClientRect().width"
    )
    assert width >= 60, width
    screenshot(driver, "team-budgets")
