"""Anomaly pages: the list with its filters, one anomaly with its chart table, drivers and the
status form (comment required), links from the overview and team pages, who sees what; and
the same in a real headless Chromium (chart drawn, status changed through the form)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.live_server_helper import LiveServer
from selenium.webdriver.remote.webdriver import WebDriver

from finops.anomalies.models import Anomaly, AnomalyStatusChange
from finops.anomalies.services import anomalies_detect
from finops.core.months import month_format
from finops.org.models import Team
from tests import anomaly_ledger as ledger
from tests.chromium import _body, _login, _wait_for_text

SINCE = ledger.START + dt.timedelta(days=20)


@pytest.fixture
def spike(team: Team) -> Anomaly:
    ledger.build(team)
    anomalies_detect(since=SINCE)
    return Anomaly.objects.get()


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_list_shows_the_anomaly_and_filters(spike: Anomaly, finance_user: User) -> None:
    client = logged_in(finance_user)
    page = client.get("/anomalies/").content.decode()
    assert f'data-testid="anomaly-row-{spike.pk}"' in page
    assert "Vision" in page
    assert "USD" in page
    assert spike.get_severity_display() in page
    assert (
        f'data-testid="anomaly-row-{spike.pk}"'
        not in client.get("/anomalies/", {"status": "resolved"}).content.decode()
    )
    assert (
        f'data-testid="anomaly-row-{spike.pk}"'
        not in client.get(
            "/anomalies/", {"until": (spike.first_day - dt.timedelta(days=1)).isoformat()}
        ).content.decode()
    )
    big = client.get("/anomalies/", {"min_impact": str(spike.impact + 1)}).content.decode()
    assert f'data-testid="anomaly-row-{spike.pk}"' not in big
    assert (
        f'data-testid="anomaly-row-{spike.pk}"'
        in client.get(
            "/anomalies/", {"team": "vision", "status": "open", "severity": spike.severity}
        ).content.decode()
    )


@pytest.mark.django_db
def test_detail_has_chart_table_drivers_and_workflow(spike: Anomaly, lead_user: User) -> None:
    client = logged_in(lead_user)
    page = client.get(f"/anomalies/{spike.pk}/").content.decode()
    assert 'data-chart="anomaly-series"' in page
    assert 'id="anomaly-series"' in page
    assert "Band high" in page
    assert "run-b" in page
    assert "Unexplained" in page
    assert "<script>" not in page  # no inline script (CSP)

    response = client.post(f"/anomalies/{spike.pk}/", {"status": "acknowledged", "comment": ""})
    assert response.status_code == 200
    assert AnomalyStatusChange.objects.count() == 0
    response = client.post(
        f"/anomalies/{spike.pk}/", {"status": "acknowledged", "comment": "checking run-b"}
    )
    assert response.status_code == 302
    change = AnomalyStatusChange.objects.get()
    assert change.user == lead_user
    assert change.comment == "checking run-b"
    assert Anomaly.objects.get().status == "acknowledged"


@pytest.mark.django_db
def test_other_teams_lead_cannot_see_it(spike: Anomaly, other_team: Team) -> None:
    from django.contrib.auth.models import User

    from finops.org.models import Profile

    user = User.objects.create_user("speechlead", password="pw-123456789")
    Profile.objects.create(user=user, role=Profile.Role.TEAM_LEAD).teams.add(other_team)
    client = logged_in(user)
    assert client.get(f"/anomalies/{spike.pk}/").status_code == 404
    assert f"anomaly-row-{spike.pk}" not in client.get("/anomalies/").content.decode()
    assert Client().get("/anomalies/").status_code == 302  # login first


@pytest.mark.django_db
def test_overview_and_team_pages_link_to_open_anomalies(spike: Anomaly, finance_user: User) -> None:
    client = logged_in(finance_user)
    month = month_format(ledger.SPIKE_DAY)
    overview = client.get("/", {"month": month}).content.decode()
    assert 'data-testid="open-anomalies"' in overview
    assert "1 open cost anomaly" in overview
    team_page = client.get("/teams/vision/", {"month": month}).content.decode()
    assert "/anomalies/?status=open&amp;team=vision" in team_page
    assert "1 open cost anomaly" in team_page


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_browser_chart_and_status_change(
    browser: WebDriver, live_server: LiveServer, team: Team, finance_user: User
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    ledger.build(team)
    anomalies_detect(since=SINCE)
    anomaly = Anomaly.objects.get()
    driver = browser
    _login(driver, live_server.url, "fin", "fin-password-123")
    driver.get(f"{live_server.url}/anomalies/?status=open")
    _wait_for_text(driver, "Cost anomalies")
    driver.find_element(By.CSS_SELECTOR, f'[data-testid="anomaly-row-{anomaly.pk}"] a').click()
    _wait_for_text(driver, "Drivers")
    assert "run-b" in _body(driver)
    # Chart.js drew on the canvas: it has a size and non-blank pixels.
    drawn = driver.execute_script(
        "var c = document.querySelector('canvas[data-chart]');"
        "var d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "for (var i = 3; i < d.length; i += 4) { if (d[i] > 0) return true; } return false;"
    )
    assert drawn
    Select(driver.find_element(By.ID, "id_status")).select_by_value("expected")
    driver.find_element(By.ID, "id_comment").send_keys("planned launch")
    driver.find_element(By.CSS_SELECTOR, '[data-testid="status-form"] button').click()
    _wait_for_text(driver, "planned launch")
    status = driver.find_element(By.CSS_SELECTOR, '[data-testid="anomaly-status"]').text
    assert status == "Expected"
    assert Anomaly.objects.get().status == "expected"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_browser_chart_marks_the_event_days(
    browser: WebDriver, live_server: LiveServer, spike: Anomaly, finance_user: User
) -> None:
    """The Event series holds the actual values on the event's days only, and Chart.js draws
    them as visible points (a one-day spike is a single point: a line alone shows nothing)."""
    _login(browser, live_server.url, "fin", "fin-password-123")
    browser.get(f"{live_server.url}/anomalies/{spike.pk}/")
    _wait_for_text(browser, "Drivers")
    labels, points = browser.execute_script(
        "var chart = Chart.getChart(document.querySelector('canvas[data-chart]'));"
        "var i = chart.data.datasets.findIndex(d => d.label === 'Event');"
        "var meta = chart.getDatasetMeta(i);"
        "return [chart.data.labels, chart.data.datasets[i].data.map((v, k) =>"
        " [v, meta.data[k].options.radius, meta.data[k].skip])];"
    )
    event_days = {
        (spike.first_day + dt.timedelta(days=k)).isoformat()
        for k in range((spike.last_day - spike.first_day).days + 1)
    }
    actual = {row["day"]: float(row["actual"]) for row in spike.chart}
    drawn = {
        day
        for day, (_value, radius, skip) in zip(labels, points, strict=True)
        if radius > 0 and not skip
    }
    assert drawn == event_days
    for day, (value, _radius, _skip) in zip(labels, points, strict=True):
        assert value == (actual[day] if day in event_days else None)


@pytest.mark.django_db
def test_endpoint_anomaly_cards_are_per_1000_requests(team: Team, finance_user: User) -> None:
    """An endpoint's series is cost per 1,000 requests: the cards give the event's actual and
    expected in that unit (totals / thousands of requests), and the impact in money."""
    from decimal import Decimal

    from finops.inference.models import EndpointCost

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
    page = logged_in(finance_user).get(f"/anomalies/{anomaly.pk}/").content.decode()
    assert "Actual cost per 1,000 requests (USD)" in page
    assert "Expected cost per 1,000 requests (USD)" in page
    assert "Money at stake over the event's 10,000 requests" in page
    assert 'data-testid="anomaly-actual">5.0000<' in page  # 50 / 10
    assert 'data-testid="anomaly-expected">2.0000<' in page  # 20 / 10
    assert 'data-testid="anomaly-impact">30.00<' in page
    assert 'class="label">Actual (USD)<' not in page  # the drivers table stays in money
