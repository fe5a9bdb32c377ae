"""The Chromium driver and page helpers every browser test uses (Debian's chromium and
chromium-driver; FINOPS_REQUIRE_BROWSER=1 turns their absence into a failure)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

if TYPE_CHECKING:  # selenium loads only for tests that drive a browser
    from selenium.webdriver import Chrome
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
]


def _require_browser() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    message = f"browser binaries absent: {', '.join(missing)}"
    if os.environ.get("FINOPS_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chrome_session(*, browser_log: bool = False) -> Iterator[Chrome]:
    """A headless Chromium driver with a throwaway profile; `browser_log` keeps the console
    log (the CSP tests read violations from it)."""
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile_dir = tempfile.mkdtemp(prefix="finops-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in [*CHROME_ARGS, f"--user-data-dir={profile_dir}"]:
        options.add_argument(arg)
    if browser_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile_dir, ignore_errors=True)


def _login(driver: WebDriver, base_url: str, username: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(base_url + "/accounts/login/")
    driver.find_element(By.ID, "id_username").send_keys(username)
    driver.find_element(By.ID, "id_password").send_keys(password)
    driver.find_element(By.ID, "login-submit").click()
    _wait_for_text(driver, "Attributed cost")


def _wait_for_text(driver: WebDriver, text: str) -> None:
    """Wait until a loaded page shows `text`. Reads the body through JavaScript so a page
    being replaced mid-check cannot leave us holding a stale element."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 15, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return document.readyState") == "complete" and text in _body(d)
    )


def _body(driver: WebDriver) -> str:
    return cast(str, driver.execute_script("return document.body ? document.body.innerText : ''"))


def _wait(driver: WebDriver, condition: Callable[[WebDriver], Any], timeout: float = 10) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def _chart(driver: WebDriver, table_id: str) -> dict[str, Any]:
    """The Chart.js chart drawn on the canvas for that table: labels and series names."""
    chart: dict[str, Any] = driver.execute_script(
        "var c = Chart.getChart(document.querySelector('canvas[data-chart=\"' + arguments[0]"
        " + '\"]')); return c ? {labels: c.data.labels,"
        " series: c.data.datasets.map(function (d) { return d.label; }),"
        " stacked: c.options.scales.y.stacked} : null;",
        table_id,
    )
    return chart
