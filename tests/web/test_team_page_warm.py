"""The team page viewed again (issue 29: a lead's team page took 7.8 s even warm at demo scale):
with the page cache on, a second view of the same data reads nothing of the stored run
economics (the six-month efficiency trend and the month's energy were read on every view; they
are kept per data version now), and shows the same trend and energy as the uncached readers.
On fixtures/scenarios/focus-slurm-run-metrics (vision's run pretrain, with metrics)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from pytest_django import Settings

from finops.core.months import month_add
from finops.economics.selectors import team_efficiency_stored
from finops.org.models import Team
from finops.web.energy_context import team_energy
from tests.scenario_setup import run_metrics_month_attributed

MONTH = date(2025, 6, 1)

pytestmark = pytest.mark.django_db


@pytest.fixture
def cache_on(settings: Settings) -> Iterator[None]:
    settings.FINOPS_API_CACHE_SECONDS = 300
    cache.clear()
    yield
    cache.clear()


def test_a_second_view_reads_no_run_economics(cache_on: None, finance_client: Client) -> None:
    run_metrics_month_attributed()
    team = Team.objects.get(slug="vision")
    url = f"/teams/{team.slug}/?month=2025-06"
    first = finance_client.get(url)
    assert first.status_code == 200
    with CaptureQueriesContext(connection) as queries:
        second = finance_client.get(url)
    assert second.status_code == 200
    read = [q["sql"] for q in queries.captured_queries if "economics_runeconomics" in q["sql"]]
    assert read == []
    months = [month_add(MONTH, -i) for i in range(5, -1, -1)]
    trend = team_efficiency_stored(team=team, months=months)
    assert trend, "the scenario's run has metrics: a trend row"
    assert second.context["efficiency"] == trend
    assert second.context["energy"] == team_energy(team=team, month=MONTH)


def test_the_first_view_reads_them(cache_on: None, finance_client: Client) -> None:
    """The test above is not vacuous: an empty cache reads the stored rollup."""
    run_metrics_month_attributed()
    with CaptureQueriesContext(connection) as queries:
        finance_client.get("/teams/vision/?month=2025-06")
    assert any("economics_runeconomics" in q["sql"] for q in queries.captured_queries)
