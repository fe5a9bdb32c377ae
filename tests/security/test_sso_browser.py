"""In a real headless Chromium, through the real OpenID provider (tests/oidc_provider.py):
finance signs in with the SSO button, onboards a team on the Onboarding page and gives its
leads' group a sign-in rule; a lead of that group then signs in and sees that team only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from pytest_django.live_server_helper import LiveServer

from finops.org.models import MappingRule, Profile, SsoRule, Team
from tests.chromium import _body, _wait_for_text, chrome_session
from tests.oidc_provider import Provider, oidc_provider, sso_settings
from tests.ui_screens import screenshot

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.browser


@pytest.fixture
def provider(live_server: LiveServer, settings: Any) -> Iterator[Provider]:
    with oidc_provider(live_server.url) as running:
        sso_settings(settings, running)
        yield running


def _sso_sign_in(driver: WebDriver, site: str, login: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(site + "/accounts/login/")
    screenshot(driver, "login-with-sso")
    driver.find_element(By.ID, "sso-login").click()
    _wait_for_text(driver, "Company sign-in")
    driver.find_element(By.ID, "login").send_keys(login)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "sign-in").click()
    _wait_for_text(driver, "Attributed cost")


def _fill(driver: WebDriver, values: dict[str, str]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for field_id, value in values.items():
        element = driver.find_element(By.ID, field_id)
        if element.tag_name == "select":
            Select(element).select_by_value(value)
        else:
            element.clear()
            element.send_keys(value)


def test_finance_onboards_a_team_by_sso_and_its_lead_signs_in(
    provider: Provider, live_server: LiveServer, team: Team
) -> None:
    from selenium.webdriver.common.by import By

    SsoRule.objects.create(value="finops-finance", role=Profile.Role.FINANCE)
    site = live_server.url
    with chrome_session() as driver:
        _sso_sign_in(driver, site, "fiona", "fiona-company-pass")
        assert "fiona · finance" in _body(driver)
        driver.find_element(By.LINK_TEXT, "Onboarding").click()
        _wait_for_text(driver, "Add a team")
        _fill(driver, {"id_team-name": "Research", "id_team-slug": "research"})
        driver.find_element(By.ID, "team-submit").click()
        _wait_for_text(driver, "Team Research (research) added.")
        _fill(driver, {"id_mapping-team": "research", "id_mapping-kind": "slurm_account",
                       "id_mapping-value": "research-gpu"})  # fmt: skip
        driver.find_element(By.ID, "mapping-submit").click()
        _wait_for_text(driver, "It applies from the next attribution")
        _fill(driver, {"id_sso-value": "ml-research-leads", "id_sso-role": "team_lead",
                       "id_sso-team": "research"})  # fmt: skip
        driver.find_element(By.ID, "sso-submit").click()
        _wait_for_text(driver, "Sign-in rule added")
        row = driver.find_element(By.CSS_SELECTOR, 'tr[data-team="research"]').text
        assert "Slurm account: research-gpu" in row
        assert "groups has ml-research-leads" in row
        screenshot(driver, "onboarding-finance-sso")

    assert MappingRule.objects.get(value="research-gpu").team.slug == "research"
    with chrome_session() as driver:
        _sso_sign_in(driver, site, "lee", "lee-company-pass")
        body = _body(driver)
        assert "lee · team lead" in body
        assert "Onboarding" not in body
        driver.get(site + "/teams/research/")
        _wait_for_text(driver, "Research")
        driver.get(site + "/api/v1/teams/")
        _wait_for_text(driver, "research")
        assert '"vision"' not in _body(driver)
        screenshot(driver, "onboarding-lead-sso")
