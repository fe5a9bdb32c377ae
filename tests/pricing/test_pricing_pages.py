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


def test_pricing_page_shows_each_team_commitments_and_the_recommendations(
    client: Client, priced_month: None
) -> None:
    _finance(client)
    page = client.get("/pricing/?month=2025-06").content.decode()
    # Each team by its name, its currency in a column of its own, money with separators.
    for slug in ("od", "spot", "ri", "cud"):
        assert f"<td>{slug}-run</td><td>USD</td>" in page
    # Commitment utilisation from the bills: cud-2 used 50, unused 30: 62.5 %.
    assert "cud-2 (USD)" in page
    assert "62.5 %" in page
    # What to do: od-run (one hour on demand, 80 paid, 80 list) on spot at 0.4 with the band's
    # rework: 80 - 32.0013 = 48.00 a month. The other runs were spot or committed already;
    # one day of history is too short for commitment advice.
    row = page.split('data-testid="recommendation-spot"')[1].split("</tr>")[0]
    assert "Run this training run on spot" in row
    assert "48.00 USD" in row
    assert 'data-testid="recommendation-commit"' not in page
    assert "Open recommendations save 48.00 USD a month: an estimate" in page


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
    # Prices to the cent (issue 27: no six-decimal figures): 28.106467 -> 28.11.
    assert "28.11 USD" in page
    assert "28.106467" not in page
    assert "snapshot: tsaol/aws-gpu@2d0108c data/gpu_instances_raw.json, 2025-11-30" in page


def test_a_type_without_a_published_price_is_said_so_on_the_pricing_and_run_pages(
    client: Client, priced_month: None
) -> None:
    # no_catalogue: the snapshot lists no type, so p5.48xlarge has no figure of any kind.
    _finance(client)
    page = client.get("/pricing/?month=2025-06").content.decode()
    assert "Catalogue prices behind the comparison" in page
    assert "no published price in snapshot: the snapshot does not list this type" in page
    run_page = client.get("/runs/od/od-run/?month=2025-06").content.decode()
    assert "No published price in snapshot" in run_page
    # Terms in words, not keys (issue 27).
    assert "1 year, no upfront; 1 year, all upfront; 3 years, no upfront; 3 years, all upfront" in (
        run_page
    )
    assert "1y_no_upfront" not in run_page


def test_only_finance_edits_assumptions(client: Client, priced_month: None) -> None:
    lead = User.objects.create_user("lead-x", password="pw-123456789")
    Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD).teams.add(
        Team.objects.get(slug="od")
    )
    client.force_login(lead)
    assert client.get("/pricing/settings/").status_code == 403
    page = client.get("/pricing/?month=2025-06").content.decode()
    assert "<td>od-run</td><td>USD</td>" in page
    assert "<td>spot-run</td>" not in page
    assert "cud-2" not in page  # commitments are the organisation's: finance only
    _finance(client)
    form = client.get("/pricing/settings/").content.decode()
    assert "id_restart_minutes" in form
    settings_form = client.get("/pricing/settings/").context["form"]
    data = {name: field.initial for name, field in settings_form.fields.items()}
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
    _wait_for_text(browser, "Pricing: what to do, and what it would have cost another way")
    browser.get(live_server.url + "/pricing/?month=2025-06")
    _wait_for_text(browser, "Commitment utilisation")
    text = _body(browser)
    assert "cud-run" in text
    assert "80.00" in text
    assert "Amortised cost (EffectiveCost)" in text
    assert "On demand (ListCost)" in text
    # The charts were drawn from their tables (Chart.js sized the canvases).
    drawn = browser.execute_script(
        "return [...document.querySelectorAll('canvas[data-chart]')]"
        ".filter(c => c.width > 0 && window.Chart && Chart.getChart(c)).length"
    )
    assert drawn >= 3
    assert RunCost.objects.count() == 4
    _assert_charts_boxed(browser)

    # The run page's comparison charts the costs only, never the numbers in the assumptions.
    browser.get(live_server.url + "/runs/spot/spot-run/?month=2025-06")
    _wait_for_text(browser, "What it cost, and what it would have cost")
    series = browser.execute_script(
        "return Chart.getChart(document.querySelector('canvas[data-chart=\"pricing-0\"]'))"
        ".data.datasets.map(d => d.label)"
    )
    assert series == ["Cost (USD)"]
    _assert_charts_boxed(browser)


def _assert_charts_boxed(browser: WebDriver) -> None:
    """Every chart sits in a sized .chart box and the page stays a page: a canvas without one
    (maintainAspectRatio off) made Chart.js grow the pricing page to 33 million pixels."""
    import time

    time.sleep(0.5)  # a runaway resize loop grows the page over a few frames
    boxed = browser.execute_script(
        "return [...document.querySelectorAll('canvas[data-chart]')]"
        ".map(c => c.parentNode.classList.contains('chart') && c.clientHeight < 400)"
    )
    assert boxed
    assert all(boxed), boxed
    assert browser.execute_script("return document.documentElement.scrollHeight") < 20000


def test_prices_older_than_the_month_by_more_than_90_days_are_said_to_be_stale(
    client: Client, priced_month: None
) -> None:
    import datetime as dt
    from decimal import Decimal

    from django.utils import timezone

    from finops.pricing.models import InstancePrice

    _finance(client)
    price = InstancePrice.objects.create(
        provider="aws", instance_type="p5.48xlarge", region="us-east-1", kind="on_demand",
        hourly=Decimal("55.04"), currency="USD", source="AWS Price List API (get_products)",
        effective_date=dt.date(2025, 3, 2), fetched_at=timezone.now(),
    )  # fmt: skip
    # 2025-03-02 is 91 days before June 2025 begins: stale.
    page = client.get("/pricing/?month=2025-06").content.decode()
    warning = page.split('data-testid="stale-prices"')[1].split("</div>")[0]
    assert "p5.48xlarge: 2025-03-02" in warning
    assert "(stale)" in page
    # 2025-03-03, 90 days: not yet.
    price.effective_date = dt.date(2025, 3, 3)
    price.save()
    page = client.get("/pricing/?month=2025-06").content.decode()
    assert 'data-testid="stale-prices"' not in page


def test_a_lead_sets_the_status_of_their_teams_recommendation_on_the_page(
    client: Client, priced_month: None
) -> None:
    from finops.pricing.models import Recommendation

    lead = User.objects.create_user("lead-od", password="pw-123456789")
    Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD).teams.add(
        Team.objects.get(slug="od")
    )
    client.force_login(lead)
    page = client.get("/pricing/?month=2025-06").content.decode()
    own = Recommendation.objects.get(team__slug="od", kind="spot")
    assert f'action="/pricing/recommendations/{own.pk}/status/"' in page
    response = client.post(
        f"/pricing/recommendations/{own.pk}/status/",
        {"status": "done", "comment": "moved to the spot partition", "next": "/teams/od/"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/teams/od/"
    own.refresh_from_db()
    assert (own.status, own.comment, own.status_changed_by) == (
        "done", "moved to the spot partition", "lead-od",
    )  # fmt: skip
    # Another team's recommendation is not theirs to see or change; a foreign "next" is not
    # followed.
    other = Recommendation.objects.create(
        billing_period=own.billing_period, team=Team.objects.get(slug="spot"), kind="idle",
        key="k", title="t", action="a", monthly_savings=1, currency="USD", confidence="low",
        computed_at=own.computed_at,
    )  # fmt: skip
    url = f"/pricing/recommendations/{other.pk}/status/"
    assert client.post(url, {"status": "dismissed"}).status_code == 404
    back = client.post(
        f"/pricing/recommendations/{own.pk}/status/",
        {"status": "open", "next": "https://evil.example/"},
    )
    assert back["Location"] == "/pricing/"


def test_a_viewer_reads_the_recommendations_without_a_status_form(
    client: Client, priced_month: None
) -> None:
    viewer = User.objects.create_user("viewer-x", password="pw-123456789")
    Profile.objects.create(user=viewer, role=Profile.Role.VIEWER)
    client.force_login(viewer)
    page = client.get("/pricing/?month=2025-06").content.decode()
    assert "48.00 USD" in page.split('data-testid="recommendation-spot"')[1]
    assert "/pricing/recommendations/" not in page  # no status form
    assert "<td>Open" in page  # the status, as text
