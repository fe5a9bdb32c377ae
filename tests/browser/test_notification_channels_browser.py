"""The chat alerts page (/channels/) in a real headless Chromium: a lead adds a Slack channel for
their team (a loopback URL refused with the reason, then taken once the host is allowed), sees
it masked, and deletes it; no organisation choice for a lead."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.notifications.models import NotificationChannel
from tests.chromium import _body, _login, _wait_for_text

pytestmark = pytest.mark.browser

URL = "http://127.0.0.1:9/services/T0001/B0002/sEcReT9876"


def _fill(browser: WebDriver, name: str, url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.find_element(By.ID, "id_name").clear()
    browser.find_element(By.ID, "id_name").send_keys(name)
    Select(browser.find_element(By.ID, "id_kind")).select_by_value("slack")
    browser.find_element(By.ID, "id_url").clear()
    browser.find_element(By.ID, "id_url").send_keys(url)
    browser.find_element(By.CSS_SELECTOR, '[data-testid="channel-add"]').click()


def test_lead_adds_a_channel_for_their_team_and_deletes_it(
    browser: WebDriver, live_server: LiveServer, lead_user: User, settings: Settings
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _login(browser, live_server.url, "lead", "lead-password-123")
    browser.get(f"{live_server.url}/channels/")
    _wait_for_text(browser, "No channels yet")
    teams = [o.text for o in Select(browser.find_element(By.ID, "id_team")).options]
    assert teams == ["Vision"]  # a lead: their teams, not the organisation

    _fill(browser, "vision-alerts", URL)
    _wait_for_text(browser, "plain http only for a host listed")
    assert NotificationChannel.objects.count() == 0

    settings.FINOPS_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    _fill(browser, "vision-alerts", URL)
    _wait_for_text(browser, "Channel vision-alerts added.")
    body = _body(browser)
    assert "http://127.0.0.1:9/…9876" in body
    assert "sEcReT" not in body
    (channel,) = NotificationChannel.objects.all()
    assert channel.team is not None
    assert (channel.team.slug, channel.events) == ("vision", ["budget", "anomaly", "close"])

    browser.find_element(By.CSS_SELECTOR, '[data-testid="channel-delete"]').click()
    _wait_for_text(browser, "Channel vision-alerts deleted.")
    assert NotificationChannel.objects.count() == 0
