"""Real headless Chromium against the live server: log in, walk the pages, check what shows.

Skips when Debian's chromium/chromedriver are absent, unless FINOPS_REQUIRE_BROWSER=1 (CI).
Static files come from the app folders through the live server's static handler, so no
collectstatic is needed.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.core.months import month_format
from finops.org.models import Profile
from finops.web.templatetags.finops_tags import money
from tests.chromium import _body, _login, _wait_for_text
from tests.factories import Scenario

pytestmark = pytest.mark.browser


def test_finance_walks_overview_team_run_reconciliation(
    browser: WebDriver,
    live_server: LiveServer,
    scenario: Scenario,
    finance_user: User,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    text = _body(driver)
    assert "September 2025" in text
    assert "Vision" in text
    assert "Speech" in text
    usd_total = sum(a.amount for a in scenario.allocations if a.billing_currency == "USD")
    assert money(usd_total) in text  # 1,500.88
    # The stylesheet loaded: the top bar is dark, not the browser default.
    bar = driver.find_element(By.CSS_SELECTOR, "header.topbar")
    assert bar.value_of_css_property("background-color") != "rgba(0, 0, 0, 0)"
    driver.save_screenshot(str(tmp_path / "overview.png"))

    driver.find_element(By.LINK_TEXT, "Vision").click()
    _wait_for_text(driver, "Vision · September 2025")
    assert money(scenario.run.cost) in _body(driver)  # 500.25
    driver.save_screenshot(str(tmp_path / "team.png"))

    driver.find_element(By.LINK_TEXT, "llama/7b v2").click()
    _wait_for_text(driver, "Run llama/7b v2")
    text = _body(driver)
    assert "5001" in text
    assert "5002" in text
    assert "FAILED" in text
    assert money(Decimal("400.25")) in text
    driver.save_screenshot(str(tmp_path / "run.png"))

    driver.find_element(By.LINK_TEXT, "Reconciliation").click()
    _wait_for_text(driver, "Reconciliation · September 2025")
    difference = driver.find_element(By.CSS_SELECTOR, '[data-testid="difference-USD"]').text
    assert difference == "0.00"
    assert "Difference" in _body(driver)
    assert "balanced" in _body(driver)
    driver.save_screenshot(str(tmp_path / "reconciliation.png"))
    assert (tmp_path / "overview.png").stat().st_size > 10_000

    # Logout is a POST form; afterwards pages send the browser back to login.
    driver.find_element(By.CSS_SELECTOR, "form.inline button").click()
    _wait_for_text(driver, "Log in")
    driver.get(live_server.url + "/")
    assert "/accounts/login/" in driver.current_url


def test_lead_sees_only_own_team(
    browser: WebDriver, live_server: LiveServer, scenario: Scenario, lead_user: User, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    driver = browser
    _login(driver, live_server.url, "lead", "lead-password-123")
    links = driver.execute_script(
        "return Array.from(document.querySelectorAll('main a')).map(a => a.textContent.trim())"
    )
    assert "Vision" in links
    assert "Speech" not in links
    assert "Speech" not in _body(driver)
    assert not driver.find_elements(By.LINK_TEXT, "Reconciliation")
    driver.save_screenshot(str(tmp_path / "lead-overview.png"))
    driver.get(live_server.url + "/teams/speech/")
    assert "Nothing here" in _body(driver)  # the 404 page (templates/404.html)
    assert "Speech" not in _body(driver)


def test_wrong_password_stays_on_login(
    browser: WebDriver, live_server: LiveServer, db: None
) -> None:
    from selenium.webdriver.common.by import By

    user = User.objects.create_user("someone", password="right-password-1")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    browser.get(live_server.url + "/accounts/login/")
    browser.find_element(By.ID, "id_username").send_keys("someone")
    browser.find_element(By.ID, "id_password").send_keys("wrong")
    browser.find_element(By.ID, "login-submit").click()
    _wait_for_text(browser, "did not match")
    assert "/accounts/login/" in browser.current_url


def test_finance_opens_endpoints_and_sees_cost_per_1k_requests(
    browser: WebDriver,
    live_server: LiveServer,
    scenario: Scenario,
    finance_user: User,
    tmp_path: Path,
) -> None:
    import datetime as dt

    from selenium.webdriver.common.by import By

    from billing_ingest.models import ImportBatch
    from finops.inference.models import InferenceUsage
    from finops.inference.services import endpoint_costs_rebuild, unit_cost
    from finops.web.templatetags.finops_tags import unit_money
    from tests.factories import AllocatedCostFactory, ImportBatchFactory, JobRecordFactory

    pod = JobRecordFactory.create(job_id="serving/chat-0", namespace="serving", endpoint="llm-chat")
    AllocatedCostFactory.create(
        job=pod, team=scenario.team, amount=Decimal("45.5"), node="gpu-node-01"
    )
    start = dt.datetime(2025, 9, 3, 10, tzinfo=dt.UTC)
    InferenceUsage.objects.create(
        batch=ImportBatchFactory.create(kind=ImportBatch.Kind.INFERENCE, format="csv"),
        cluster="k8s-1", endpoint="llm-chat", window_start=start,
        window_end=start + dt.timedelta(hours=1), requests=7000, prompt_tokens=10,
        generation_tokens=5,
    )  # fmt: skip
    endpoint_costs_rebuild(month=scenario.month)

    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.find_element(By.LINK_TEXT, "Endpoints").click()
    _wait_for_text(driver, "Inference endpoints · September 2025")
    row = driver.find_element(
        By.CSS_SELECTOR, f'[data-testid="endpoint-llm-chat-{scenario.team.slug}-USD"]'
    )
    assert "llm-chat" in row.text
    assert "Vision" in row.text
    cell = row.find_element(By.CSS_SELECTOR, '[data-testid="per-1k-requests"]').text
    assert cell == unit_money(unit_cost(Decimal("45.5"), 7000, 1000))  # 6.5000
    assert "Per 1k requests" in _body(driver)
    assert "$/1k" not in _body(driver)
    driver.save_screenshot(str(tmp_path / "endpoints.png"))


def test_overview_loads_with_no_console_error_and_a_favicon(
    live_server: LiveServer,
    scenario: Scenario,
    finance_user: User,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A page load leaves the browser console clean (no CSP or script error) and asks the
    server for nothing that is missing: the pages link static/favicon.svg (allowed by the
    CSP's img-src 'self'), so Chromium no longer asks for /favicon.ico and gets a 404.
    Headless Chromium does not put a favicon's 404 in the console log, hence the server log."""
    from django.test import Client

    from tests.chromium import chrome_session

    with chrome_session(browser_log=True) as driver:
        _login(driver, live_server.url, "fin", "fin-password-123")
        driver.get_log("browser")  # the login page's entries: not the page under test
        caplog.clear()
        driver.get(f"{live_server.url}/?month={month_format(scenario.month)}")
        _wait_for_text(driver, "Attributed cost")
        # The linked icon, fetched by the page itself under its CSP.
        icon = driver.execute_async_script(
            "var done = arguments[0], link = document.querySelector('link[rel=icon]');"
            "if (!link) { done(null); return; }"
            "fetch(link.href).then(r => done([link.href, r.status, r.headers.get('content-type')]))"
            ".catch(e => done(['' + e, 0, '']));"
        )
        severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    assert icon is not None, "the page links no icon"
    href, status, content_type = icon
    assert href.endswith("/static/favicon.svg")
    assert status == 200
    assert content_type.startswith("image/svg+xml")
    not_found = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert not_found == []
    # Pages that do not link it (the admin's, the API's) get the same icon for /favicon.ico.
    assert Client().get("/favicon.ico")["Location"] == "/static/favicon.svg"
