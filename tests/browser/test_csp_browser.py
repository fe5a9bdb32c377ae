"""The Content-Security-Policy in a real Chromium (issue 9, item 3): the pages and the
vendored Chart.js work under it with no violation in the browser log, while an inline script
is refused (so the log would show a violation if a page had one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver import Chrome

from finops.core.months import month_format
from finops.org.models import Team
from tests.chromium import _login, chrome_session
from tests.factories import build_month_scenario

pytestmark = [pytest.mark.browser, pytest.mark.urls("tests.csp_chart_urls")]


@pytest.fixture
def driver() -> Iterator[Chrome]:
    with chrome_session(browser_log=True) as browser:
        yield browser


def _violations(driver: Chrome) -> list[str]:
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if "Content Security Policy" in entry["message"] or "Refused to" in entry["message"]
    ]


def test_chart_draws_with_no_csp_violation(
    driver: Chrome, live_server: LiveServer, finance_user: User
) -> None:
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(live_server.url + "/csp-test/chart/")
    drawn = driver.execute_script(
        "var c = document.getElementById('c');"
        "return !!(window.Chart && Chart.getChart(c)) && c.width > 0 && c.height > 0;"
    )
    assert drawn, "Chart.js did not draw the chart"
    assert _violations(driver) == []


def test_pages_have_no_csp_violation(
    driver: Chrome, live_server: LiveServer, team: Team, other_team: Team, finance_user: User
) -> None:
    scenario = build_month_scenario(team=team, other_team=other_team)
    _login(driver, live_server.url, "fin", "fin-password-123")
    month = f"?month={month_format(scenario.month)}"
    for page in ("/", f"/teams/{team.slug}/", "/endpoints/", "/reconciliation/", "/imports/"):
        driver.get(live_server.url + page + month)
    # The team page's charts are drawn by the vendored Chart.js under the policy.
    driver.get(live_server.url + f"/teams/{team.slug}/" + month)
    drawn = driver.execute_script(
        "return Array.from(document.querySelectorAll('canvas[data-chart]'))"
        ".map(c => Boolean(window.Chart && Chart.getChart(c)));"
    )
    assert drawn
    assert all(drawn)
    assert _violations(driver) == []


def test_an_inline_script_is_refused_and_logged(
    driver: Chrome, live_server: LiveServer, db: None
) -> None:
    driver.get(live_server.url + "/csp-test/inline/")
    assert driver.title != "inline ran"
    assert any("script-src" in message for message in _violations(driver))
