"""kWh and kg CO2e on the run and team pages (issue 32), the figures of the hand-worked
scenario fixtures/scenarios/focus-slurm-energy: through Django's client, then in Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from tests.energy_inputs import energy_month, scenario_load
from tests.ui_screens import screenshot

pytestmark = pytest.mark.django_db


def test_the_run_and_team_pages_show_kwh_and_co2e(finance_client: Client) -> None:
    energy_month()
    run = finance_client.get("/runs/vision/pretrain/?month=2025-06").content.decode()
    assert 'data-testid="energy-gpu-kwh">2.60<' in run
    assert 'data-testid="energy-facility-kwh">2.95<' in run
    assert 'data-testid="energy-co2e">1.09<' in run
    assert "energy-estimated" not in run
    assert "PUE 1.135" in run
    assert "369.473 g CO2e/kWh, 2023" in run
    unmeasured = finance_client.get("/runs/speech/eval/?month=2025-06").content.decode()
    assert 'data-testid="energy-estimated"' in unmeasured
    assert 'data-testid="energy-gpu-kwh">1.40<' in unmeasured
    team = finance_client.get("/teams/speech/?month=2025-06").content.decode()
    assert 'data-testid="energy-co2e">0.587<' in team
    assert 'data-testid="energy-estimated"' in team
    empty = finance_client.get("/teams/vision/?month=2025-05").content.decode()
    assert 'data-testid="energy-none"' in empty


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_run_page_in_chromium(
    browser: WebDriver, live_server: LiveServer, finance_user: object
) -> None:
    from selenium.webdriver.common.by import By

    from tests.chromium import _login

    energy_month()
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(f"{live_server.url}/runs/vision/pretrain/?month=2025-06")
    box = browser.find_element(By.CSS_SELECTOR, "[data-testid=energy]")
    assert "2.60" in box.text
    assert "1.09" in box.text
    screenshot(browser, "energy-run")
    browser.get(f"{live_server.url}/teams/speech/?month=2025-06")
    assert browser.find_element(By.CSS_SELECTOR, "[data-testid=energy-co2e]").text == "0.587"
    screenshot(browser, "energy-team")


def test_the_endpoint_page_shows_energy_per_1k_requests(
    finance_client: Client, tmp_path: Path
) -> None:
    """fixtures/scenarios/coreweave-vllm: endpoint `chat` served by pod chat-0, 4 H100 for 2 h
    = 8 GPU-hours, no DCGM data: estimated at the H100's 700 W (utilisation unknown: 1) =
    5.6 kWh; CoreWeave publishes no PUE: the pricing settings' 1.4 -> 7.84 kWh facility; 5,000
    requests -> 7.84 x 1000 / 5000 = 1.568 kWh per 1k requests. Region US-EAST-04A is in the
    USA (369.473 g/kWh, 2023): 7.84 x 0.369473 = 2.89666832 -> 2.896668 kg; 2,000,000 tokens
    -> 1.448334 kg per 1M tokens."""
    scenario_load("coreweave-vllm", "2025-06", tmp_path)
    html = finance_client.get("/endpoints/chat/?month=2025-06").content.decode()
    assert 'data-testid="endpoint-gpu-kwh">5.60<' in html
    assert 'data-testid="endpoint-kwh-1k">1.568000<' in html
    assert 'data-testid="endpoint-co2e">2.90<' in html
    assert 'data-testid="endpoint-co2e-1m">1.448334<' in html
    assert "endpoint-co2e-partial" not in html
    assert 'data-testid="endpoint-energy-estimated"' in html
