"""Screenshots of the Chromium tests' pages (the `browser` fixture of conftest), saved as CI
artefacts in $FINOPS_SCREENSHOT_DIR (default var/screenshots/)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

ROOT = Path(__file__).resolve().parent.parent


def screenshot_dir() -> Path:
    folder = Path(os.environ.get("FINOPS_SCREENSHOT_DIR") or ROOT / "var" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def screenshot(driver: WebDriver, name: str) -> Path:
    """Save the window as NAME.png (a full page where the page is taller than the window)."""
    path = screenshot_dir() / f"{name}.png"
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, min(max(int(height), 1000), 4000))
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    return path
