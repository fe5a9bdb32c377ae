"""The cost explorer in a real headless Chromium: finance groups the hand-made month of
fixtures/explorer/ by region, the stacked chart is drawn from the data table, and
switching to invoiced cost by service changes the figures; a lead sees their team's cost."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from tests.chromium import _body, _chart, _login, _wait, _wait_for_text
from tests.explorer_month import explorer_month  # noqa: F401 - fixtures/explorer/
from tests.ui_screens import screenshot, screenshot_dir

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("explorer_month")]


def test_explorer_groups_filters_and_draws(
    browser: WebDriver,
    live_server: LiveServer,
    finance_user: User,
    lead_user: User,
    tmp_path: Any,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(live_server.url + "/explorer/?month=2025-09&group_by=region")
    _wait_for_text(driver, "Cost explorer")
    chart = _wait(driver, lambda d: _chart(d, "explorer-table"))
    # Biggest first: us-east-1 100, europe-west4 55, us-west-2 48; stacked per day.
    assert chart["series"] == ["us-east-1", "europe-west4", "us-west-2"]
    assert chart["stacked"] is True
    assert chart["labels"] == ["2025-09-01", "2025-09-02", "2025-09-03"]
    total = driver.find_element(By.CSS_SELECTOR, '[data-testid="explorer-total"]').text
    assert total == "203.00 USD"
    screenshot(driver, "explorer-region")

    # Invoiced, by service, monthly: Savings Plans 300, EC2 120 + 0, Compute Engine 55.
    group = driver.find_element(By.ID, "ex-group")
    group.clear()
    group.send_keys("service")
    Select(driver.find_element(By.ID, "ex-cost")).select_by_value("invoiced")
    Select(driver.find_element(By.ID, "ex-interval")).select_by_value("month")
    driver.find_element(By.CSS_SELECTOR, '[data-testid="explorer-filters"] button').click()
    _wait_for_text(driver, "Invoiced cost")
    total = driver.find_element(By.CSS_SELECTOR, '[data-testid="explorer-total"]').text
    assert total == "475.00 USD"
    chart = _wait(driver, lambda d: _chart(d, "explorer-table"))
    assert chart["series"] == ["Savings Plans", "Amazon Elastic Compute Cloud", "Compute Engine"]
    assert chart["labels"] == ["September 2025"]
    csv = driver.find_element(By.CSS_SELECTOR, '[data-testid="explorer-csv"]')
    assert "cost=invoiced" in (csv.get_attribute("href") or "")
    screenshot(driver, "explorer-invoiced")

    driver.delete_all_cookies()
    _login(driver, live_server.url, "lead", "lead-password-123")
    driver.get(live_server.url + "/explorer/?month=2025-09&group_by=service")
    _wait_for_text(driver, "your teams only")
    total = driver.find_element(By.CSS_SELECTOR, '[data-testid="explorer-total"]').text
    assert total == "155.00 USD"
    assert "Speech" not in _body(driver)


# Each label's box beside its control (same line, just left of it) or just above it.
LABEL_BOXES = """
return [...document.querySelectorAll('[data-testid=explorer-filters] label')].map(l => {
  const a = l.getBoundingClientRect(), b = document.getElementById(l.htmlFor)
    .getBoundingClientRect();
  return {label: l.textContent.trim(), left: a.left, right: a.right, top: a.top,
          bottom: a.bottom, c_left: b.left, c_top: b.top, c_bottom: b.bottom};
});
"""


def _apart(box: dict[str, Any]) -> bool:
    beside = (
        0 <= box["c_left"] - box["right"] <= 24
        and box["c_top"] <= (box["top"] + box["bottom"]) / 2 <= box["c_bottom"]
    )
    above = 0 <= box["c_top"] - box["bottom"] <= 12 and abs(box["c_left"] - box["left"]) <= 4
    return not (beside or above)


@pytest.mark.parametrize("width", [1280, 800])
def test_explorer_labels_sit_by_their_inputs(
    browser: WebDriver, live_server: LiveServer, finance_user: User, width: int
) -> None:
    driver = browser
    driver.set_window_size(width, 900)
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(live_server.url + "/explorer/?month=2025-09&group_by=region")
    _wait_for_text(driver, "Cost explorer")
    assert driver.execute_script("return window.innerWidth") <= width
    boxes = driver.execute_script(LABEL_BOXES)
    assert len(boxes) >= 8  # up to, months, interval, group by, cost, the filters, tag
    assert [b["label"] for b in boxes if _apart(b)] == []
    driver.save_screenshot(str(screenshot_dir() / f"explorer-filters-{width}.png"))  # at width
