"""Helpers for the Chromium tests of this issue's pages: a driver fixture (as tests/test_browser.py
starts one) and screenshots saved as CI artefacts in $FINOPS_SCREENSHOT_DIR (default
var/screenshots/)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_browser import CHROME_ARGS, CHROMEDRIVER, CHROMIUM, _require_browser

ROOT = Path(__file__).resolve().parent.parent


def screenshot_dir() -> Path:
    folder = Path(os.environ.get("FINOPS_SCREENSHOT_DIR") or ROOT / "var" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def screenshot(driver: object, name: str) -> Path:
    """Save the window as NAME.png (a full page where the page is taller than the window)."""
    path = screenshot_dir() / f"{name}.png"
    height = driver.execute_script("return document.body.scrollHeight")  # type: ignore[attr-defined]
    driver.set_window_size(1400, min(max(int(height), 1000), 4000))  # type: ignore[attr-defined]
    driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    driver.set_window_size(1400, 1000)  # type: ignore[attr-defined]
    return path


@pytest.fixture
def chromium() -> Iterator[object]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile_dir = tempfile.mkdtemp(prefix="finops-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in [*CHROME_ARGS, f"--user-data-dir={profile_dir}"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile_dir, ignore_errors=True)
