"""Anomaly figures in the unit their series measures (review defect 3): a cluster's idle-share
anomaly gives its share in % on its cards and in its email (its chart too), with the money
impact labelled apart; an endpoint anomaly's email gives cost per 1,000 requests with its
currency, as its cards do.

Cluster data: node n1 of cluster hpc costs 1,000 USD a day for 40 days, 10 % of it idle
(about: a small weekly wiggle), and 60 % idle on one day.

An endpoint's anomaly is a unit-cost event (issue 28): worded "Unit cost spike", valued by the
money at stake (never more than its spend above its usual spend), so an endpoint whose cost is
flat while its traffic dips on weekends is no anomaly."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from billing_ingest.models import ImportBatch, JobRecord
from finops.anomalies.emails import anomaly_notify, subject_for
from finops.anomalies.models import Anomaly
from finops.anomalies.services import anomalies_detect
from finops.attribution.models import AllocatedCost, Category
from finops.inference.models import EndpointCost
from finops.notifications.models import EmailNotification
from finops.org.models import Profile, Team
from tests.chromium import _body, _login, _wait_for_text
from tests.ui_screens import screenshot

START = dt.date(2025, 8, 1)
DAYS = 40
SPIKE_DAY = START + dt.timedelta(days=35)
IDLE = [Decimal("0.10"), Decimal("0.11"), Decimal("0.09"), Decimal("0.105"), Decimal("0.095")]
DAY_COST = Decimal(1000)


@pytest.fixture
def finance(db: None, settings: Settings) -> User:
    settings.SITE_URL = "https://finops.example"
    user = User.objects.create_user("fin", email="fin@example.com", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


def _idle_cluster(team: Team) -> None:
    batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="hpc", file_name="j", status="succeeded"
    )
    job = JobRecord.objects.create(
        batch=batch, cluster="hpc", job_id="1", account="a", state="RUNNING",
        start=dt.datetime.combine(START, dt.time(), dt.UTC), end=None, gpus=8, nodes=["n1"],
        run_id="run-a",
    )  # fmt: skip
    common = dict(provider_name="AWS", service_name="Amazon EC2", billing_currency="USD",
                  node="n1")  # fmt: skip
    for i in range(DAYS):
        day = START + dt.timedelta(days=i)
        idle = DAY_COST * (Decimal("0.60") if day == SPIKE_DAY else IDLE[i % 5])
        AllocatedCost.objects.create(
            billing_period=day.replace(day=1), day=day, category=Category.IDLE, team=None,
            amount=idle, **common,
        )  # fmt: skip
        AllocatedCost.objects.create(
            billing_period=day.replace(day=1), day=day, category=Category.TRAINING, team=team,
            job=job, run_id="run-a", amount=DAY_COST - idle, **common,
        )  # fmt: skip


def _cluster_anomaly(team: Team) -> Anomaly:
    _idle_cluster(team)
    anomalies_detect(since=START + dt.timedelta(days=20))
    return Anomaly.objects.get(series_kind=Anomaly.Series.CLUSTER_IDLE)


@pytest.mark.django_db
def test_cluster_idle_cards_give_the_share_and_the_money_apart(team: Team, finance: User) -> None:
    anomaly = _cluster_anomaly(team)
    assert (anomaly.first_day, anomaly.last_day) == (SPIKE_DAY, SPIKE_DAY)
    # The share is of the cluster's GPU node cost that day: 600 idle of 1,000.
    assert anomaly.share_base == DAY_COST
    assert anomaly.actual == Decimal(600)
    client = Client()
    client.force_login(finance)
    page = client.get(f"/anomalies/{anomaly.pk}/").content.decode()
    assert "Idle GPU share, actual (% of the cluster's GPU node cost)" in page
    assert 'data-testid="anomaly-actual">60.0 %<' in page
    expected_share = anomaly.expected / DAY_COST
    assert f'data-testid="anomaly-expected">{(expected_share * 100):.1f} %<' in page
    points = (Decimal("0.60") - expected_share) * 100
    assert f'data-testid="anomaly-points">+{points:.1f}<' in page
    assert "Money impact: idle cost above the expected share" in page
    assert f'data-testid="anomaly-impact">{anomaly.impact:,.2f}<' in page
    # The chart is in the same unit as the cards: percent.
    assert "The series (idle share, % of the cluster&#x27;s GPU node cost)" in page
    assert 'data-value="60.00"' in page
    assert 'class="label">Actual (USD)<' not in page


@pytest.mark.django_db
def test_cluster_idle_email_gives_the_share(team: Team, finance: User) -> None:
    anomaly = _cluster_anomaly(team)
    [email] = EmailNotification.objects.filter(key__startswith=f"anomaly:{anomaly.pk}:")
    for body in (email.text_body, email.html_body):
        assert "Idle GPU share, actual" in body
        assert "60.0 %" in body
        assert "percentage points" in body
        assert f"{anomaly.impact:,.2f} USD" in body
        assert "Actual: 600.00" not in body


@pytest.mark.django_db
def test_endpoint_email_is_per_1000_requests(team: Team, finance: User) -> None:
    first = dt.date(2025, 9, 1)
    # 4,000 + 6,000 requests cost 20 + 30 USD: 50 / 10 = 5 USD per 1,000 requests.
    for offset, (requests, cost) in enumerate([(4000, "20.00"), (6000, "30.00")]):
        day = first + dt.timedelta(days=offset)
        EndpointCost.objects.create(
            billing_period=day.replace(day=1), day=day, endpoint="chat", team=team,
            billing_currency="USD", cost=Decimal(cost), requests=requests,
        )  # fmt: skip
    anomaly = Anomaly.objects.create(
        identity=f"{team.pk}|endpoint|chat|{first}", team=team, series_kind="endpoint",
        series_key="chat", kind="level_shift", first_day=first,
        last_day=first + dt.timedelta(days=1), detected_on=first, currency="USD",
        actual=Decimal("50.00"), expected=Decimal("20.00"), impact=Decimal("30.00"),
        unexplained=Decimal(0), severity="high", unit="USD per 1,000 requests",
    )  # fmt: skip
    assert anomaly_notify(anomaly=anomaly) == 1
    email = EmailNotification.objects.get()
    for body in (email.text_body, email.html_body):
        assert "Actual cost per 1,000 requests" in body
        assert "5.0000 USD" in body  # 50 / 10
        assert "2.0000 USD" in body  # 20 / 10
        assert "Money at stake over the event&#x27;s 10,000 requests" in body or (
            "Money at stake over the event's 10,000 requests" in body
        )
        assert "30.00 USD" in body
        assert "Actual: 50.00" not in body


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_cluster_idle_page_in_chromium(
    browser: WebDriver, live_server: LiveServer, team: Team, finance: User
) -> None:
    anomaly = _cluster_anomaly(team)
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(f"{live_server.url}/anomalies/{anomaly.pk}/")
    _wait_for_text(browser, "Idle GPU share, actual")
    text = _body(browser)
    assert "60.0 %" in text
    assert "percentage points" in text
    # The chart's points are in percent, as the cards.
    values = browser.execute_script(
        "return Chart.getChart(document.querySelector('canvas[data-chart=\"anomaly-series\"]'))"
        ".data.datasets[0].data.filter(v => v !== null)"
    )
    assert max(values) == 60
    screenshot(browser, "anomaly-cluster-idle-share")


# --- endpoint unit cost (issue 28) ------------------------------------------------------------


def _endpoint_days(team: Team, costs: list[Decimal], requests: list[int]) -> None:
    """An endpoint's EndpointCost rows from START, and the team's flat ledger beside them (the
    detection reads the ledger's span)."""
    from tests.budget_data import ledger_days

    ledger_days(team=team, first=START, amounts=[DAY_COST] * len(costs))
    for i, (cost, count) in enumerate(zip(costs, requests, strict=True)):
        day = START + dt.timedelta(days=i)
        EndpointCost.objects.create(
            billing_period=day.replace(day=1), day=day, endpoint="chat", team=team,
            billing_currency="USD", cost=cost, requests=count,
        )  # fmt: skip


def _weekday_traffic(days: int, *, dips_from: int = 0) -> list[int]:
    # 100,000 requests a day; from day `dips_from` on, 15,000 on weekends: the cost per 1,000
    # requests is then 6.7x on weekends while the endpoint's cost (its GPUs, kept up) is flat.
    return [
        15_000 if i >= dips_from and (START + dt.timedelta(days=i)).weekday() >= 5 else 100_000
        for i in range(days)
    ]


@pytest.mark.django_db
def test_flat_cost_with_weekend_traffic_dips_is_no_anomaly(team: Team) -> None:
    # The traffic starts dipping on weekends after four weeks (users went back to office
    # hours): the unit cost jumps on those weekends, the spend does not move.
    _endpoint_days(team, [Decimal(1000)] * 56, _weekday_traffic(56, dips_from=28))
    anomalies_detect(since=START + dt.timedelta(days=14))
    assert not Anomaly.objects.filter(series_kind=Anomaly.Series.ENDPOINT).exists()


@pytest.mark.django_db
def test_unit_cost_spike_is_worded_as_unit_cost_and_valued_by_the_money_at_stake(
    team: Team, finance: User
) -> None:
    costs = [Decimal(1000)] * 56
    spike = 49  # a Tuesday: 100,000 requests as usual, the cost 2,500
    costs[spike] = Decimal(2500)
    _endpoint_days(team, costs, _weekday_traffic(56))
    anomalies_detect(since=START + dt.timedelta(days=14))

    (anomaly,) = Anomaly.objects.filter(series_kind=Anomaly.Series.ENDPOINT)
    assert anomaly.first_day == START + dt.timedelta(days=spike)
    assert anomaly.kind_label == "Unit cost spike"
    # At stake: the 1,500 above the usual spend (which is also the excess over 100,000
    # requests at the usual 10 USD per 1,000), never more.
    assert Decimal(1400) <= anomaly.impact <= Decimal(1500)
    # No ledger row names the endpoint here, so no team owns it: the subject names it.
    assert subject_for(anomaly).startswith("[GPU FinOps] Unit cost spike for chat: 1,500.00 USD")
    assert "USD at stake from" in subject_for(anomaly)
    assert finance.email
