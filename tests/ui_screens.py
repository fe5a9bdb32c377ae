"""Helpers for the Chromium tests of this issue's pages: a driver fixture (as tests/test_browser.py
starts one) and screenshots saved as CI artefacts in $FINOPS_SCREENSHOT_DIR (default
var/screenshots/)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chromium import chrome_session

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
    with chrome_session() as driver:
        yield driver
