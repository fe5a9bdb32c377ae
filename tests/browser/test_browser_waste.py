"""Waste by cause in a real headless Chromium (issue 31), on the hand-worked scenario
fixtures/scenarios/focus-slurm-waste: the run page's attempt timeline, the team page's waste
card and the overview's; each saved as a screenshot (tests/ui_screens.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.org.models import Team
from tests.chromium import _body, _login, _wait_for_text
from tests.scenario_setup import SCENARIOS, load_setup, run_command
from tests.ui_screens import screenshot

pytestmark = pytest.mark.browser
FOLDER = SCENARIOS / "focus-slurm-waste"


@pytest.fixture
def waste_scene(tmp_path: Path, team: Team, other_team: Team) -> None:
    setup = json.loads((FOLDER / "setup.json").read_text())
    load_setup({**setup, "fixtures": []}, tmp_path)
    for command in setup["commands"]:
        run_command(FOLDER, command)
    run_command(FOLDER, ["attribute", "--month", "2025-06"])


def _count(driver: WebDriver, selector: str) -> int:
    return cast(
        int, driver.execute_script(f"return document.querySelectorAll('{selector}').length")
    )


def test_run_timeline_and_waste_cards(
    browser: WebDriver, live_server: LiveServer, finance_user: User, waste_scene: None
) -> None:
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")

    driver.get(f"{live_server.url}/runs/vision/pretrain/?month=2025-06")
    _wait_for_text(driver, "Attempts and waste (USD)")
    # Two attempts on the timeline; attempt 1's rework after its 10:45 checkpoint, attempt 2's
    # restart until its first step; six checkpoints (2 + 4).
    assert _count(driver, "[data-testid=run-timeline] .attempt-bar") == 2
    assert _count(driver, "[data-testid=run-timeline] .attempt-rework") == 1
    assert _count(driver, "[data-testid=run-timeline] .attempt-restart") == 1
    assert _count(driver, "[data-testid=run-timeline] .checkpoint") == 6
    total = driver.execute_script(
        "return document.querySelector('[data-testid=run-waste-total]').innerText"
    )
    assert total.replace(",", "").startswith("28.00"), total
    screenshot(driver, "run-waste-timeline")

    driver.get(f"{live_server.url}/runs/speech/finetune/?month=2025-06")
    _wait_for_text(driver, "Attempts and waste (USD)")
    assert "Estimated parts assume a checkpoint every 24.00 minutes" in _body(driver)
    screenshot(driver, "run-waste-estimated")

    driver.get(f"{live_server.url}/teams/speech/?month=2025-06")
    _wait_for_text(driver, "Waste by cause")
    card = cast(str, driver.execute_script(
        "return document.querySelector('[data-testid=waste-card-USD]').innerText"
    ))  # fmt: skip
    for text in ("61.00", "25.00", "partly estimated"):
        assert text in card, card
    screenshot(driver, "team-waste-card")

    driver.get(f"{live_server.url}/?month=2025-06")
    _wait_for_text(driver, "Waste by cause")
    assert "149.00" in cast(str, driver.execute_script(
        "return document.querySelector('[data-testid=waste-total-USD]').innerText"
    ))  # fmt: skip
    screenshot(driver, "overview-waste-card")


def test_checkpoint_advice_shows_what_to_do_and_its_saving_without_scrolling(
    browser: WebDriver, live_server: LiveServer, finance_user: User, waste_scene: None
) -> None:
    """The advice table is wider than the page (13 columns) and scrolls in its card; what to do
    and what it would have saved come first, inside the card's visible width (h-pages: on the
    demo both were the last columns, off to the right of a 1,400 px window)."""
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(f"{live_server.url}/teams/speech/?month=2025-06")
    _wait_for_text(driver, "What to change: checkpoints and allocations")
    hidden = driver.execute_script(
        """const table = document.querySelector('[data-testid=checkpoint-advice]');
        const box = table.parentElement.getBoundingClientRect();
        const cells = [...table.querySelectorAll(
            '[data-testid=advice-action], [data-testid=advice-saving]')];
        return [cells.length, cells.filter(c => c.getBoundingClientRect().right > box.right + 1)
            .map(c => c.innerText)];"""
    )
    count, outside = hidden
    assert count >= 2, count  # a row at least, its action and its saving
    assert outside == [], outside
    screenshot(driver, "team-checkpoint-advice")
