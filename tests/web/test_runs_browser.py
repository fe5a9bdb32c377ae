"""The runs browser /runs/: training runs across the viewer's teams, paged on the server,
sorted and filtered by the same FilterSet as the API's /api/v1/runs/; the team page's top runs."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from finops.attribution.models import Category, RunCost
from finops.economics.models import RunEconomics
from finops.org.models import Team
from finops.pricing.recommendations import recommendations_refresh
from tests.factories import (
    AllocatedCostFactory,
    RunCostFactory,
    TeamDailyCostFactory,
    TeamFactory,
)
from tests.page_tables import match
from tests.query_budgets import (
    CHECKPOINT_ADVICE_QUERIES,
    IDLE_SHOWBACK_QUERIES,
    RUN_WASTE_QUERIES,
    WASTE_CARD_QUERIES,
    WASTE_PAGE_QUERIES,
)

UTC = dt.UTC
SEP = dt.date(2025, 9, 1)


def _page(client: Client, **params: Any) -> str:
    params.setdefault("month", "2025-09")
    response = client.get(reverse("web:runs"), params)
    assert response.status_code == 200, response.content[:500]
    return re.sub(r"\s+", " ", response.content.decode())


def _run_ids(html: str) -> list[str]:
    rows = re.findall(r'<tr data-testid="run-row">(.*?)</tr>', html)
    return [re.sub(r"<[^>]+>", "", match(r"<td[^>]*>(.*?)</td>", r).group(1)) for r in rows]


def _api_ids(client: Client, **params: Any) -> list[str]:
    params.setdefault("month", "2025-09")
    params.setdefault("limit", 1000)
    response = client.get("/api/v1/runs/", params)
    assert response.status_code == 200, response.content[:500]
    return [r["run_id"] for r in response.json()["results"]]


@pytest.fixture
def runs(team: Team, other_team: Team) -> None:
    """Five runs chosen so every sort key orders them differently."""

    def run(
        run_id: str, team: Team, cost: str, hours: str, wasted: str, start_day: int, **kw: Any
    ) -> RunCost:
        return RunCostFactory.create(
            team=team, run_id=run_id, cost=Decimal(cost), gpu_seconds=Decimal(hours) * 3600,
            wasted_cost=Decimal(wasted),
            first_start=dt.datetime(2025, 9, start_day, tzinfo=UTC), **kw,
        )  # fmt: skip

    # cost:      a 9, b 10, c 250, d 100, e 30  ("9" > "10" as text: sorts numerically)
    # GPU-hours: a 3, b 1,  c 50,  d 10,  e 0
    # $/GPU-h:   a 3, b 10, c 5,   d 10,  e none
    run("a-vision", team, "9", "3", "0", 5, cluster="hpc1", jobs=1200)
    run("b-vision", team, "10", "1", "4", 1, cluster="hpc2", failed_jobs=1)
    run("c-speech", other_team, "250", "50", "20", 3, cluster="hpc1", running_jobs=2)
    run("d-vision", team, "100", "10", "0.5", 2, cluster="hpc2")
    run("e-speech", other_team, "30", "0", "0", 4, cluster="hpc1")
    # Not listed: a serving pod (inference) and another month.
    run("serve/chat-0", team, "999", "9", "0", 1, category=Category.INFERENCE)
    run("old", team, "5", "1", "0", 1, billing_period=dt.date(2025, 8, 1))


@pytest.mark.parametrize(
    ("ordering", "expected"),
    [
        ("-cost", ["c-speech", "d-vision", "e-speech", "b-vision", "a-vision"]),
        ("cost", ["a-vision", "b-vision", "e-speech", "d-vision", "c-speech"]),
        ("-gpu_hours", ["c-speech", "d-vision", "a-vision", "b-vision", "e-speech"]),
        # Equal $/GPU-hour (b, d: 10) by cost; no GPU-hours (e) last either way.
        ("-cost_per_gpu_hour", ["d-vision", "b-vision", "c-speech", "a-vision", "e-speech"]),
        ("cost_per_gpu_hour", ["a-vision", "c-speech", "d-vision", "b-vision", "e-speech"]),
        ("-wasted_cost", ["c-speech", "b-vision", "d-vision", "e-speech", "a-vision"]),
        ("start", ["b-vision", "d-vision", "c-speech", "e-speech", "a-vision"]),
    ],
)
def test_sorts_page_and_api_alike(
    finance_client: Client, runs: None, ordering: str, expected: list[str]
) -> None:
    assert _run_ids(_page(finance_client, ordering=ordering)) == expected
    assert _api_ids(finance_client, ordering=ordering) == expected


def test_default_is_most_expensive_first_training_only(finance_client: Client, runs: None) -> None:
    html = _page(finance_client)
    assert _run_ids(html) == ["c-speech", "d-vision", "e-speech", "b-vision", "a-vision"]
    assert "serve/chat-0" not in html
    assert 'data-testid="runs-count">5 runs' in html
    # Counts with thousands separators.
    assert '<td class="num">1,200</td>' in html


def test_inference_runs_on_request_in_the_api(finance_client: Client, runs: None) -> None:
    assert _api_ids(finance_client, category="inference") == ["serve/chat-0"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"team": "speech"}, ["c-speech", "e-speech"]),
        ({"cluster": "hpc2"}, ["d-vision", "b-vision"]),
        ({"state": "running"}, ["c-speech"]),
        ({"state": "failed"}, ["b-vision"]),
        ({"state": "completed"}, ["d-vision", "e-speech", "a-vision"]),
        ({"q": "VISION"}, ["d-vision", "b-vision", "a-vision"]),
        ({"q": "a-v", "team": "vision"}, ["a-vision"]),
        ({"month": "2025-08"}, ["old"]),
    ],
)
def test_filters_page_and_api_alike(
    finance_client: Client, runs: None, params: dict[str, str], expected: list[str]
) -> None:
    assert _run_ids(_page(finance_client, **params)) == expected
    assert _api_ids(finance_client, **params) == expected


def test_lead_sees_only_their_teams(lead_client: Client, runs: None) -> None:
    assert _run_ids(_page(lead_client)) == ["d-vision", "b-vision", "a-vision"]
    assert _run_ids(_page(lead_client, team="speech")) == []
    assert _api_ids(lead_client, team="speech") == []
    html = _page(lead_client)
    assert "Speech" not in html


def test_pages_on_the_server_without_overlap(finance_client: Client, team: Team) -> None:
    for i in range(120):
        RunCostFactory.create(team=team, run_id=f"r{i:03d}", cost=Decimal(1000 - i))
    seen = []
    for number, size in ((1, 50), (2, 50), (3, 20)):
        html = _page(finance_client, page=number)
        ids = _run_ids(html)
        assert len(ids) == size
        seen += ids
        assert f"page {number} of 3" in html
    assert seen == [f"r{i:03d}" for i in range(120)]
    # Paging keeps the filters and the sort.
    html = _page(finance_client, ordering="cost", team="vision")
    assert "?ordering=cost&amp;team=vision&amp;month=2025-09&amp;page=2" in html


def test_bad_filter_is_a_friendly_400(finance_client: Client, runs: None) -> None:
    response = finance_client.get(reverse("web:runs"), {"state": "exploded"})
    assert response.status_code == 400
    assert "Cannot filter the runs" in response.content.decode()


def test_team_page_lists_top_runs_and_links_to_the_browser(
    finance_client: Client, team: Team
) -> None:
    for i in range(25):
        RunCostFactory.create(team=team, run_id=f"r{i:02d}", cost=Decimal(100 + i))
    RunCostFactory.create(team=team, run_id="serve/x", cost=Decimal(10_000), category="inference")
    html = re.sub(
        r"\s+",
        " ",
        finance_client.get(
            reverse("web:team", args=["vision"]), {"month": "2025-09"}
        ).content.decode(),
    )
    listed = re.findall(r"/runs/vision/(r\d\d)/\?month", html)
    assert listed == [f"r{i:02d}" for i in range(24, 4, -1)]  # the 20 most expensive
    assert "serve/x" not in html
    assert 'href="/runs/?team=vision&amp;month=2025-09"' in html
    assert "All 25 training runs of Vision" in html


@pytest.mark.parametrize("size", [3, 60])
def test_runs_and_team_and_run_pages_keep_a_fixed_number_of_queries(
    finance_client: Client,
    team: Team,
    other_team: Team,
    size: int,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    for i in range(size):
        owner = team if i % 2 else other_team
        RunCostFactory.create(team=owner, run_id=f"r{i}", cluster=f"c{i % 5}")
        TeamDailyCostFactory.create(team=TeamFactory.create(slug=f"t{i}"), amount=Decimal(i))
        AllocatedCostFactory.create(team=team, run_id="r1", amount=Decimal(i))
    # Session, user, months with data (2), profile, count, clusters, teams for the filter, page.
    with django_assert_max_num_queries(RUNS_QUERIES):
        _page(finance_client)
    # The month's recommendations as the pipeline leaves them (a first view computes them).
    recommendations_refresh(month=dt.date(2025, 9, 1))
    # Session, user, profile, team, months (2), totals, daily, reporting rows, top runs, run
    # count, daily by category.
    with django_assert_max_num_queries(TEAM_QUERIES):
        finance_client.get(reverse("web:team", args=["vision"]), {"month": "2025-09"})
    # Session, user, profile, team, months (2), rollups, ledger by job, the jobs (when any).
    with django_assert_max_num_queries(RUN_QUERIES):
        finance_client.get(reverse("web:run", args=["vision", "r1"]), {"month": "2025-09"})


RUNS_QUERIES = 9 + WASTE_PAGE_QUERIES
# Budgets, anomalies, statements, the pricing comparison and the recommendations (whether their
# inputs moved: 4; the team's: 1) included; the waste card, the top runs' waste column and the
# checkpoint advice and the idle showback (not stored in this month of factories: read at read
# time, tests/query_budgets.py).
TEAM_QUERIES = (
    24 + IDLE_SHOWBACK_QUERIES + WASTE_CARD_QUERIES + CHECKPOINT_ADVICE_QUERIES + WASTE_PAGE_QUERIES
)
# The pricing comparison, the run's spot advice, its attempts' waste and the energy of the run
# (the ledger by job and node; with jobs, a fixed few more: finops/energy/selectors.energies).
RUN_QUERIES = 16 + RUN_WASTE_QUERIES


def _store(run_id: str, **values: Any) -> None:
    """A stored run-economics row (finops.economics) for the month's rollup of `run_id`, as
    the pipeline's step writes it (waste_total the sum of the parts given)."""
    run = RunCost.objects.get(run_id=run_id, billing_period=SEP)
    parts = ("waste_rework", "waste_restart", "waste_abandoned", "waste_idle")
    values["waste_total"] = sum((values.get(p, Decimal(0)) for p in parts), Decimal(0))
    RunEconomics.objects.create(
        billing_period=SEP, team_id=run.team_id, run_id=run.run_id, cluster=run.cluster,
        currency=run.billing_currency, category=run.category, cost=run.cost, **values,
    )  # fmt: skip


@pytest.fixture
def stored(runs: None) -> None:
    """waste: a 5 (abandoned), b 0, c 1 (idle), d 20 (rework 15, estimated, + restart 5), e 3
    (idle); per 1M tokens: a 2, c 0.5, d 1 (b, e no metrics); MFU: a 30 %, c 45 %, d 10 %;
    GPU kWh: a 10, b 2, c 50, e 7 (d none)."""
    _store("a-vision", waste_abandoned=Decimal(5), has_metrics=True, mfu=Decimal("0.3"),
           cost_per_million_tokens=Decimal(2), gpu_kwh=Decimal(10))  # fmt: skip
    _store("b-vision", gpu_kwh=Decimal(2))
    _store("c-speech", waste_idle=Decimal(1), has_metrics=True, mfu=Decimal("0.45"),
           cost_per_million_tokens=Decimal("0.5"), gpu_kwh=Decimal(50))  # fmt: skip
    _store("d-vision", waste_rework=Decimal(15), waste_restart=Decimal(5),
           waste_estimated="rework", has_metrics=True, mfu=Decimal("0.1"),
           cost_per_million_tokens=Decimal(1))  # fmt: skip
    _store("e-speech", waste_idle=Decimal(3), gpu_kwh=Decimal(7))


@pytest.mark.parametrize(
    ("ordering", "expected"),
    [
        ("-waste", ["d-vision", "a-vision", "e-speech", "c-speech", "b-vision"]),
        ("waste", ["b-vision", "c-speech", "e-speech", "a-vision", "d-vision"]),
        # Runs without metrics last either way, by cost (e 30 before b 10).
        ("cost_per_million_tokens", ["c-speech", "d-vision", "a-vision", "e-speech", "b-vision"]),
        ("-cost_per_million_tokens", ["a-vision", "d-vision", "c-speech", "e-speech", "b-vision"]),
        ("-mfu", ["c-speech", "a-vision", "d-vision", "e-speech", "b-vision"]),
        ("-kwh", ["c-speech", "a-vision", "e-speech", "b-vision", "d-vision"]),
    ],
)
def test_sorts_by_the_stored_run_economics_page_and_api_alike(
    finance_client: Client, stored: None, ordering: str, expected: list[str]
) -> None:
    assert _run_ids(_page(finance_client, ordering=ordering)) == expected
    assert _api_ids(finance_client, ordering=ordering) == expected


def test_a_run_no_team_owns_sorts_by_its_own_stored_figures(
    finance_client: Client, stored: None
) -> None:
    RunCostFactory.create(team=None, run_id="z-nobody", cost=Decimal(1))
    _store("z-nobody", waste_abandoned=Decimal(100))
    assert _api_ids(finance_client, ordering="-waste")[:2] == ["z-nobody", "d-vision"]


def test_the_runs_that_waste_most_head_the_page_with_cause_and_fix(
    finance_client: Client, stored: None
) -> None:
    html = _page(finance_client)
    table = match(r'data-testid="runs-wasting-most">(.*?)</table>', html).group(1)
    rows = re.findall(r'<tr data-testid="wasting-row">(.*?)</tr>', table)
    assert [match(r"<a [^>]*>(.*?)</a>", r).group(1) for r in rows] == [
        "d-vision", "a-vision", "e-speech", "c-speech",
    ]  # fmt: skip
    # d: 20 of its 100 USD, mostly rework (an estimate), and what to change.
    assert "20.00 USD*" in rows[0]
    assert "20.0 %" in rows[0]
    assert "rework (estimated)" in rows[0]
    assert "checkpoint more often" in rows[0]
    assert "abandoned" in rows[1]
    # The old "Failed attempts" column is gone from the page (the API keeps wasted_cost).
    assert "Failed attempts" not in html
    assert 'data-testid="sort-waste"' in html
