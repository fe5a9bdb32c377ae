"""A team whose GPU lines carry no ListCost (and whose type has no catalogue price): its
on-demand cost is unknown, and the comparison says so on the team, run and pricing pages and in
the API (null with a reason) instead of computing savings from a stand-in (review defect 1).

One hour on 2025-06-03: a job holding all 8 GPUs of its p5.48xlarge node, $1,000 paid."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.live_server_helper import LiveServer
from rest_framework.test import APIClient
from selenium.webdriver.remote.webdriver import WebDriver

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost, RunCost
from finops.attribution.services import attribution_month_run
from finops.org.models import MappingRule, Profile, Team
from tests.chromium import _body, _login, _wait_for_text
from tests.ui_screens import screenshot_dir

# An empty price catalogue (conftest): nothing stands in for the missing ListCost.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]

MONTH = dt.date(2025, 6, 1)
T0 = dt.datetime(2025, 6, 3, 10, tzinfo=dt.UTC)


def _month(list_cost: Decimal | None) -> RunCost:
    team = Team.objects.create(slug="nolist", name="No list price")
    MappingRule.objects.create(kind="slurm_account", value="acct", team=team)
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    CostLineItem.objects.create(
        batch=billing, source="s", billing_period=MONTH, billing_period_start=T0,
        provider_name="AWS", billing_account_id="1", billing_currency="USD",
        charge_period_start=T0, charge_period_end=T0 + dt.timedelta(hours=1),
        charge_category="Usage", pricing_category="Standard", resource_name="n1",
        region_id="us-east-1", x_instance_type="p5.48xlarge", billed_cost=Decimal("1000"),
        effective_cost=Decimal("1000"), list_cost=list_cost,
    )  # fmt: skip
    JobRecord.objects.create(
        batch=jobs, cluster="c", job_id="1", account="acct", state="COMPLETED", start=T0,
        end=T0 + dt.timedelta(hours=1), gpus=8, nodes=["n1"], run_id="r1",
    )  # fmt: skip
    attribution_month_run(month=MONTH)
    return RunCost.objects.get(run_id="r1")


def _finance() -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


def _assert_unknown(body: dict[str, object]) -> None:
    on_demand = body["on_demand"]
    assert isinstance(on_demand, dict)
    assert on_demand["cost"] is None
    assert on_demand["savings"] is None
    assert on_demand["unpriced_cost"] == "1000.00"
    # The reason names the type nothing could price.
    assert "no list price for p5.48xlarge (AWS)" in on_demand["unknown_reason"]
    # Spot and reserved are priced from the on-demand figure: unknown too, never 0.00.
    for key in ("spot", "reserved_1y", "reserved_3y"):
        part = body[key]
        assert isinstance(part, dict)
        assert part["cost"] is None, key
        assert part["unknown_reason"] == on_demand["unknown_reason"]
    # On premises is priced from GPU-hours: still known, so it is the only alternative.
    assert body["best_alternative"] == "on_prem"


# A ListCost that is absent, and one an export left at 0 on usage that cost $1,000.
@pytest.mark.parametrize("list_cost", [None, Decimal(0)])
def test_the_api_says_the_on_demand_cost_is_unknown(list_cost: Decimal | None) -> None:
    run = _month(list_cost)
    assert set(AllocatedCost.objects.values_list("list_cost_source", flat=True)) == {"unpriced"}
    client = APIClient()
    client.force_authenticate(_finance())
    _assert_unknown(client.get(f"/api/v1/runs/{run.pk}/pricing/").json())
    [team] = client.get("/api/v1/pricing-comparison/?month=2025-06").json()
    _assert_unknown(team)


def test_a_known_list_cost_keeps_its_figures() -> None:
    run = _month(Decimal("1200"))
    client = APIClient()
    client.force_authenticate(_finance())
    body = client.get(f"/api/v1/runs/{run.pk}/pricing/").json()
    assert body["on_demand"]["cost"] == "1200.00"
    assert body["on_demand"]["savings"] == "200.00"
    assert body["on_demand"]["unpriced_cost"] == "0.00"
    assert body["on_demand"]["unknown_reason"] is None
    assert body["spot"]["cost"] is not None


def test_the_pages_say_unknown_and_show_no_savings(client: Client) -> None:
    _month(None)
    client.force_login(_finance())
    for url in ("/teams/nolist/?month=2025-06", "/runs/nolist/r1/?month=2025-06"):
        page = client.get(url).content.decode()
        assert 'data-testid="on-demand-unknown"' in page, url
        assert "No list price in the bill" in page
        row = page.split('data-testid="on-demand-unknown"')[1].split("</tr>")[0]
        assert not re.search(r"savings -?[0-9]", row), row
        assert "-1,000.00" not in page
    pricing = client.get("/pricing/?month=2025-06").content.decode()
    assert "unknown: no list price for p5.48xlarge (AWS)" in pricing
    assert "-1,000.00" not in pricing


def test_team_page_in_chromium(browser: WebDriver, live_server: LiveServer) -> None:
    _month(None)
    _finance()
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(live_server.url + "/teams/nolist/?month=2025-06")
    _wait_for_text(browser, "What it cost, and what it would have cost")
    text = _body(browser)
    assert "No list price in the bill" in text
    assert not re.search(r"savings -?[0-9]", text)
    browser.execute_script(
        "document.querySelector('[data-testid=\"on-demand-unknown\"]').scrollIntoView()"
    )
    browser.save_screenshot(str(screenshot_dir() / "team-on-demand-unknown.png"))
