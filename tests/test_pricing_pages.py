"""The Pricing page, the assumptions form, and the comparison on team and run pages (issue 13).

Data: the four golden runs of tests/pricing_golden.py (one team each)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.attribution.models import RunCost
from finops.org.models import Profile, Team
from finops.pricing.models import PricingAssumptions
from tests.chromium import _body, _login, _wait_for_text

# An empty price catalogue unless a test asks for real_snapshot (conftest).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]


def _finance(client: Client) -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    client.force_login(user)
    return user


def test_pricing_page_shows_each_team_commitments_and_the_recommendation(
    client: Client, priced_month: None
) -> None:
    _finance(client)
    page = client.get("/pricing/?month=2025-06&team=cud").content.decode()
    for slug in ("od", "spot", "ri", "cud"):
        assert f"<td>{slug} (USD)</td>" in page
    # Commitment utilisation from the bills: cud-2 used 50, unused 30 (0.625).
    assert "cud-2 (USD)" in page
    assert "0.625" in page
    assert 'data-chart="pricing-demand"' in page
    assert "How much to commit: cud" in page


def test_team_and_run_pages_show_the_comparison(client: Client, priced_month: None) -> None:
    _finance(client)
    team_page = client.get("/teams/spot/?month=2025-06").content.decode()
    assert 'data-chart="pricing-0"' in team_page
    assert "32.00" in team_page
    run_page = client.get("/runs/spot/spot-run/?month=2025-06").content.decode()
    assert "Pricing comparison" in run_page
    assert "30.00" in run_page
    assert "80.00" in run_page


def test_the_run_page_shows_each_catalogue_price_beside_its_source(
    client: Client, real_snapshot: None, priced_month: None
) -> None:
    _finance(client)
    page = client.get("/runs/od/od-run/?month=2025-06").content.decode()
    assert "Catalogue prices behind the spot and reserved figures" in page
    # p5.48xlarge on demand and spot from the shipped snapshot, each with where it came from.
    assert "55.04 USD" in page
    assert "28.106467 USD" in page
    assert "snapshot: tsaol/aws-gpu@2d0108c data/gpu_instances_raw.json, 2025-11-30" in page


def test_only_finance_edits_assumptions(client: Client, priced_month: None) -> None:
    lead = User.objects.create_user("lead-x", password="pw-123456789")
    Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD).teams.add(
        Team.objects.get(slug="od")
    )
    client.force_login(lead)
    assert client.get("/pricing/settings/").status_code == 403
    page = client.get("/pricing/?month=2025-06").content.decode()
    assert "<td>od (USD)</td>" in page
    assert "<td>spot (USD)</td>" not in page
    assert "cud-2" not in page  # commitments are the organisation's: finance only
    _finance(client)
    form = client.get("/pricing/settings/").content.decode()
    assert "id_restart_minutes" in form
    data = {
        field: value
        for field, value in PricingAssumptions.objects.values().get(pk=1).items()
        if field not in ("id", "updated_at")
    }
    data = {k: (__import__("json").dumps(v) if isinstance(v, dict) else v) for k, v in data.items()}
    data["restart_minutes"] = "12"
    assert client.post("/pricing/settings/", data).status_code == 302
    assert PricingAssumptions.current().restart_minutes == 12


def test_pricing_page_in_chromium(
    browser: WebDriver, live_server: LiveServer, priced_month: None
) -> None:
    from selenium.webdriver.common.by import By

    User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=User.objects.get(username="fin"), role=Profile.Role.FINANCE)
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.find_element(By.LINK_TEXT, "Pricing").click()
    _wait_for_text(browser, "Pricing: reserved vs spot vs on demand vs on premises")
    browser.get(live_server.url + "/pricing/?month=2025-06")
    _wait_for_text(browser, "Commitment utilisation")
    text = _body(browser)
    assert "cud (USD)" in text
    assert "80.00" in text
    # The charts were drawn from their tables (Chart.js sized the canvases).
    drawn = browser.execute_script(
        "return [...document.querySelectorAll('canvas[data-chart]')]"
        ".filter(c => c.width > 0 && window.Chart && Chart.getChart(c)).length"
    )
    assert drawn >= 3
    assert RunCost.objects.count() == 4
