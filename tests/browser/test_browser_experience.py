"""The dashboard and the runs browser in a real headless Chromium: the charts are drawn from
their tables, the stack toggle and month window work, /runs/ sorts, filters and pages; each
state is saved as a screenshot (CI artefacts, tests/ui_screens.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.attribution.models import Category
from finops.org.models import Team
from tests.chromium import _chart, _login, _wait
from tests.factories import RunCostFactory, TeamDailyCostFactory
from tests.ui_screens import screenshot

pytestmark = pytest.mark.browser
UTC = dt.UTC


def _by(name: str) -> str:
    from selenium.webdriver.common.by import By

    return cast(str, getattr(By, name))


@pytest.fixture
def months_of_cost(team: Team, other_team: Team) -> None:
    for period, amount in ((dt.date(2025, 7, 1), 10), (dt.date(2025, 8, 1), 20)):
        TeamDailyCostFactory.create(
            team=team, billing_period=period, day=period.replace(day=3), amount=Decimal(amount)
        )
    for day in range(1, 11):
        TeamDailyCostFactory.create(team=team, day=dt.date(2025, 9, day), amount=Decimal(30 + day))
        TeamDailyCostFactory.create(
            team=other_team, day=dt.date(2025, 9, day), amount=Decimal(5 * day),
            category=Category.INFERENCE,
        )  # fmt: skip
    TeamDailyCostFactory.create(
        team=None, day=dt.date(2025, 9, 2), amount=Decimal(40), category=Category.IDLE
    )


def test_overview_dashboard(
    browser: WebDriver, live_server: LiveServer, finance_user: User, months_of_cost: None
) -> None:
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(f"{live_server.url}/?month=2025-09&months=3")
    chart = _wait(driver, lambda d: _chart(d, "cost-over-time"))
    assert chart["series"] == ["Speech", "Vision", "No team (platform)"]
    assert chart["stacked"] is True
    assert chart["labels"][0] == "2025-07-03"
    assert len(chart["labels"]) == 12
    change = _chart(driver, "month-change")
    assert change["series"] == ["August 2025", "September 2025"]
    shares = driver.find_element(_by("CSS_SELECTOR"), "[data-testid=idle-share]").text
    # Idle 40 of Vision 355 + Speech 275 + 40 = 670: 5.97 %.
    assert shares == "6.0 %"
    screenshot(driver, "overview-dashboard-by-team")

    # The toggle: stack by category.
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(_by("ID"), "dash-by")).select_by_value("category")
    driver.find_element(_by("CSS_SELECTOR"), "[data-testid=dashboard-controls] button").click()
    _wait(driver, lambda d: "by=category" in d.current_url)
    chart = _wait(driver, lambda d: _chart(d, "cost-over-time"))
    assert chart["series"] == ["training", "inference", "idle"]
    screenshot(driver, "overview-dashboard-by-category")


@pytest.fixture
def many_runs(team: Team, other_team: Team) -> None:
    for i in range(60):
        RunCostFactory.create(
            team=team if i % 3 else other_team, run_id=f"run-{i:02d}", cost=Decimal(1000 + i),
            gpu_seconds=Decimal(3600 * (i + 1)), cluster="hpc1" if i % 2 else "hpc2",
            first_start=dt.datetime(2025, 9, 1, tzinfo=UTC) + dt.timedelta(hours=i),
        )  # fmt: skip


def _ids(driver: WebDriver) -> list[str]:
    rows = driver.find_elements(_by("CSS_SELECTOR"), "[data-testid=run-row] td:first-child")
    return [r.text for r in rows]


def test_runs_browser_sorts_filters_and_pages(
    browser: WebDriver, live_server: LiveServer, finance_user: User, many_runs: None
) -> None:
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(f"{live_server.url}/runs/?month=2025-09")
    assert _ids(driver)[:3] == ["run-59", "run-58", "run-57"]
    assert driver.find_element(_by("CSS_SELECTOR"), "[data-testid=runs-count]").text.startswith(
        "60 runs, 1\u201350 shown"
    )
    screenshot(driver, "runs-browser")

    # Sort: GPU-hours, biggest first, then click again for smallest first.
    driver.find_element(_by("CSS_SELECTOR"), "[data-testid=sort-gpu_hours]").click()
    _wait(driver, lambda d: "ordering=-gpu_hours" in d.current_url)
    assert _ids(driver)[0] == "run-59"
    driver.find_element(_by("CSS_SELECTOR"), "[data-testid=sort-gpu_hours]").click()
    _wait(driver, lambda d: "ordering=gpu_hours" in d.current_url)
    assert _ids(driver)[:2] == ["run-00", "run-01"]

    # Page 2 keeps the sort.
    driver.find_element(_by("CSS_SELECTOR"), "[data-testid=next-page]").click()
    _wait(driver, lambda d: "page=2" in d.current_url)
    assert _ids(driver) == [f"run-{i:02d}" for i in range(50, 60)]
    screenshot(driver, "runs-browser-page-2")

    # Filter: team Vision on cluster hpc1, and a run id search.
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(_by("ID"), "runs-team")).select_by_value("vision")
    Select(driver.find_element(_by("ID"), "runs-cluster")).select_by_value("hpc1")
    search = driver.find_element(_by("ID"), "runs-q")
    search.clear()
    search.send_keys("run-1")
    driver.find_element(_by("CSS_SELECTOR"), "[data-testid=runs-filters] button").click()
    _wait(driver, lambda d: "q=run-1" in d.current_url)
    # Vision: i % 3 != 0; hpc1: odd i; "run-1": 10..19 -> 11, 13, 17, 19 smallest GPU-hours first.
    assert _ids(driver) == ["run-11", "run-13", "run-17", "run-19"]
    assert "page=" not in driver.current_url
    screenshot(driver, "runs-browser-filtered")
