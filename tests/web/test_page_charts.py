"""Charts on the team, run and endpoint pages: each canvas names a data table on the page, and
the table holds the figures (by hand from the rows created here); counts carry separators."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

from django.test import Client
from django.urls import reverse

from billing_ingest.models import ImportBatch
from finops.attribution.models import Category
from finops.inference.services import endpoint_costs_rebuild
from finops.org.models import Team
from tests.client_types import Response
from tests.factories import (
    MONTH,
    AllocatedCostFactory,
    ImportBatchFactory,
    JobRecordFactory,
    RunCostFactory,
    TeamDailyCostFactory,
    ledger_row,
    serving_pod,
    usage_hour,
)
from tests.page_tables import table_rows

UTC = dt.UTC


def _html(response: Response) -> str:
    assert response.status_code == 200
    return re.sub(r"\s+", " ", response.content.decode())


def _charts(html: str) -> list[str]:
    """Every chart's table id, checking the table is on the page and the scripts load."""
    ids = re.findall(r'<canvas data-chart="([^"]+)"', html)
    for table_id in ids:
        assert f'id="{table_id}"' in html
    assert "/static/vendor/chartjs/chart.umd.min.js" in html
    assert "/static/finops-charts.js" in html
    return ids


def test_team_page_daily_cost_by_category(finance_client: Client, team: Team) -> None:
    day1, day2 = dt.date(2025, 9, 1), dt.date(2025, 9, 2)
    TeamDailyCostFactory.create(team=team, day=day1, amount=Decimal("10.5"))
    TeamDailyCostFactory.create(team=team, day=day1, amount=Decimal("4"), category=Category.IDLE)
    TeamDailyCostFactory.create(team=team, day=day2, amount=Decimal("1"), category=Category.SHARED)
    html = _html(finance_client.get(reverse("web:team", args=[team.slug]), {"month": "2025-09"}))
    assert _charts(html) == ["team-daily", "pricing-0"]  # the pricing comparison has its own
    assert 'data-chart-type="bar" data-stacked' in html
    assert table_rows(html, "team-daily") == [
        ["Day", "Training", "Shared", "Idle", "Total"],
        ["Mon 1 Sep", "10.50", "0.00", "4.00", "14.50"],
        ["Tue 2 Sep", "0.00", "1.00", "0.00", "1.00"],
    ]
    # The Total column is for reading, not a stacked series.
    assert '<th class="num" data-no-chart>Total</th>' in html


def test_run_page_cost_per_job(finance_client: Client, team: Team) -> None:
    run = RunCostFactory.create(team=team, run_id="big", jobs=1234)
    first = JobRecordFactory.create(
        job_id="11", run_id="big", start=dt.datetime(2025, 9, 2, tzinfo=UTC)
    )
    second = JobRecordFactory.create(
        job_id="12", run_id="big", start=dt.datetime(2025, 9, 5, tzinfo=UTC)
    )
    AllocatedCostFactory.create(team=team, run_id="big", job=second, amount=Decimal("7.25"))
    AllocatedCostFactory.create(team=team, run_id="big", job=first, amount=Decimal("3"))
    AllocatedCostFactory.create(team=team, run_id="big", job=first, amount=Decimal("2"))
    html = _html(
        finance_client.get(reverse("web:run", args=[team.slug, run.run_id]), {"month": "2025-09"})
    )
    assert _charts(html) == ["run-jobs-USD", "pricing-0"]
    assert table_rows(html, "run-jobs-USD") == [
        ["Job", "Cost (USD)"],
        ["11", "5.00"],
        ["12", "7.25"],
    ]
    assert "1,234 / 0" in html


def test_endpoint_page_daily_cost_and_cost_per_1k_requests(
    finance_client: Client, team: Team
) -> None:
    chat = serving_pod("chat-a", "llm-chat")
    ledger_row(chat, team, dt.date(2025, 9, 3), "30")
    ledger_row(chat, team, dt.date(2025, 9, 4), "12.5")
    batch = ImportBatchFactory.create(kind=ImportBatch.Kind.INFERENCE, format="csv", source="k8s-1")
    usage_hour(batch, "llm-chat", dt.date(2025, 9, 3), 10, 15_000, 1_000_000, 0)
    endpoint_costs_rebuild(month=MONTH)
    html = _html(
        finance_client.get(reverse("web:endpoint", args=["llm-chat"]), {"month": "2025-09"})
    )
    assert _charts(html) == ["endpoint-cost-USD", "endpoint-unit-USD"]
    # 30 / 15 thousand requests = 2.0000 a thousand; no requests on the 4th: no unit cost.
    assert table_rows(html, "endpoint-cost-USD") == [
        ["Day", "Cost (USD)", "USD/1k requests"],
        ["Wed 3 Sep", "30.00", "2.0000"],
        ["Thu 4 Sep", "12.50", "\u2013"],
    ]
    assert table_rows(html, "endpoint-unit-USD")[1:] == [
        ["Wed 3 Sep", "2.0000"],
        ["Thu 4 Sep", "\u2013"],
    ]
    assert ">15,000<" in html
    assert ">1,000,000<" in html
