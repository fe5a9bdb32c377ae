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
    # Each team by its name, its currency in a column of its own, money with separators.
    for slug in ("od", "spot", "ri", "cud"):
        assert f"<td>{slug}-run</td><td>USD</td>" in page
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
    assert "1y_no_upfront, 1y_all_upfront, 3y_no_upfront, 3y_all_upfront" in run_page


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
    _wait_for_text(browser, "Pricing: reserved vs spot vs on demand vs on premises")
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


def _short_history_team() -> Team:
    """A team whose first job (4 GPUs, running ever since) starts 45 days before July 2025:
    enough history for the 30-day level, not for the 60- and 90-day ones."""
    import datetime as dt
    from decimal import Decimal

    from billing_ingest.models import ImportBatch, JobRecord
    from finops.attribution.models import AllocatedCost, Category

    team = Team.objects.create(slug="new", name="New team")
    batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    start = dt.datetime(2025, 7, 1, tzinfo=dt.UTC) - dt.timedelta(days=45)
    job = JobRecord.objects.create(
        batch=batch, cluster="c", job_id="1", state="RUNNING", start=start, end=None,
        gpus=Decimal(4), nodes=["n1"], run_id="new-run",
    )  # fmt: skip
    AllocatedCost.objects.create(
        billing_period=dt.date(2025, 6, 1), day=dt.date(2025, 6, 10), category=Category.TRAINING,
        team=team, job=job, provider_name="AWS", service_name="Amazon EC2",
        billing_currency="USD", amount=Decimal("100"),
    )  # fmt: skip
    return team


def test_recommendation_says_when_history_is_shorter_than_a_window(db: None) -> None:
    import datetime as dt
    from decimal import Decimal

    from finops.pricing.commitments import recommendation
    from finops.pricing.comparisons import assumptions_current

    team = _short_history_team()
    assumptions = assumptions_current()
    rec = recommendation(
        team_id=team.pk, until=dt.datetime(2025, 7, 1, tzinfo=dt.UTC),
        on_demand_gpu_hour=Decimal("10"), assumptions=assumptions,
    )  # fmt: skip
    thirty, sixty, ninety = rec["levels"]
    # 4 GPUs in every hour of the last 30 days: any percentile is 4.
    assert thirty["gpus"] == "4.00"
    r = assumptions.reserved_ratios.get("1y_all_upfront", Decimal(1))
    assert Decimal(thirty["savings_per_month_1y"]) == (4 * 730 * 10 * (1 - r)).quantize(
        Decimal("0.01")
    )
    # 60 and 90 days reach back before the first job: no level, no savings, no payback.
    for level in (sixty, ninety):
        assert level["gpus"] is None
        assert level["history_days"] == 45
        assert not any(key.startswith(("savings", "payback")) for key in level)


def test_pricing_page_says_only_n_days_of_history(client: Client) -> None:
    _finance(client)
    _short_history_team()
    page = client.get("/pricing/?month=2025-06&team=new").content.decode()
    for days in (60, 90):
        row = page.split(f'data-testid="short-history-{days}"')[1].split("</tr>")[0]
        assert "Only 45 days of history" in row
    assert 'data-testid="short-history-30"' not in page
    # The demand chart's line is the longest level the history fills: 30 days, at 4 GPUs.
    assert "Commit level (30 days)" in page
    assert "Commit level (90 days)" not in page
