"""Pages: each renders the right figures for finance; a team lead sees only their team."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from decimal import Decimal

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from finops.attribution.models import AllocatedCost, Category
from finops.org.models import Team
from finops.pricing.recommendations import recommendations_refresh
from finops.web.templatetags.finops_tags import money
from tests.client_types import Response
from tests.factories import (
    CostLineItemFactory,
    ImportBatchFactory,
    RunCostFactory,
    Scenario,
    TeamDailyCostFactory,
    TeamFactory,
)
from tests.query_budgets import (
    CHECKPOINT_ADVICE_QUERIES,
    ENERGY_CARD_QUERIES,
    IDLE_ADVICE_QUERIES,
    IDLE_SHOWBACK_QUERIES,
    RUN_WASTE_QUERIES,
    WASTE_CARD_QUERIES,
    WASTE_PAGE_QUERIES,
)


def _text(response: Response) -> str:
    assert response.status_code == 200, response.status_code
    # Collapse whitespace so assertions read like what a person sees.
    return re.sub(r"\s+", " ", response.content.decode())


def _sum(rows: Iterable[AllocatedCost], **filters: object) -> Decimal:
    return sum(
        (r.amount for r in rows if all(getattr(r, k) == v for k, v in filters.items())),
        Decimal(0),
    )


def test_money_filter_formats_for_people() -> None:
    assert money(Decimal("1234567.891")) == "1,234,567.89"
    assert money(Decimal("0.005")) == "0.01"
    assert money(Decimal("-0.001")) == "0.00"
    assert money(None) == "\u2013"


def test_overview_for_finance(finance_client: Client, scenario: Scenario) -> None:
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-09"}))
    usd = [a for a in scenario.allocations if a.billing_currency == "USD"]
    total_usd = _sum(usd)
    assert f'data-testid="total-USD">{money(total_usd)}<' in html
    assert money(total_usd) == "1,500.88"
    assert f'data-testid="total-EUR">{money(Decimal(50))}<' in html
    # Each team row links to its page and shows its own total.
    for team in (scenario.team, scenario.other_team):
        url = reverse("web:team", args=[team.slug]) + "?month=2025-09"
        assert f'href="{url}">{team.name}</a>' in html
        assert money(_sum(usd, team_id=team.id)) in html
    # The idle and unallocated totals, and per-provider totals.
    assert money(_sum(usd, category=Category.IDLE)) in html  # 220.00
    assert money(_sum(usd, provider_name="GCP")) in html  # 300.13
    assert "No team (platform)" in html


def test_overview_defaults_to_latest_month_and_lists_months(
    finance_client: Client, scenario: Scenario, team: Team
) -> None:
    TeamDailyCostFactory.create(
        team=team,
        billing_period=dt.date(2025, 8, 1),
        day=dt.date(2025, 8, 2),
        amount=Decimal("7.77"),
    )
    html = _text(finance_client.get(reverse("web:overview")))
    assert "September 2025" in html
    assert '<option value="2025-09" selected>' in html
    assert '<option value="2025-08">' in html
    html = _text(finance_client.get(reverse("web:overview"), {"month": "2025-08"}))
    assert "7.77" in html


def test_overview_for_lead_shows_only_their_team(lead_client: Client, scenario: Scenario) -> None:
    html = _text(lead_client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert scenario.team.name in html
    assert scenario.other_team.name not in html
    assert "No team (platform)" not in html
    own = _sum(scenario.allocations, team_id=scenario.team.id)
    assert f'data-testid="total-USD">{money(own)}<' in html


def _table_head(html: str, testid: str) -> str:
    found = re.search(rf'data-testid="{testid}">\s*<thead>(.*?)</thead>', html, re.S)
    assert found is not None, testid
    return found[1]


def test_overview_team_table_has_no_unallocated_column_for_a_lead(
    client: Client, lead_user: User, finance_user: User, scenario: Scenario
) -> None:
    """Unallocated cost is the organisation's (finance's), never a team's: a lead's "By team"
    table would show it as 0.00 on every row."""
    client.force_login(lead_user)  # lead_client and finance_client are one client
    lead = _text(client.get(reverse("web:overview"), {"month": "2025-09"}))
    client.force_login(finance_user)
    finance = _text(client.get(reverse("web:overview"), {"month": "2025-09"}))
    assert "<th" in _table_head(lead, "team-table")
    assert "Unallocated" not in _table_head(lead, "team-table")
    assert "Unallocated" in _table_head(finance, "team-table")
    for other in ("Training", "Idle", "Shared"):
        assert other in _table_head(lead, "team-table")


def test_bad_month_is_400(finance_client: Client) -> None:
    assert finance_client.get(reverse("web:overview"), {"month": "20x5"}).status_code == 400


def test_team_page(finance_client: Client, scenario: Scenario) -> None:
    team = scenario.team
    html = _text(finance_client.get(reverse("web:team", args=[team.slug]), {"month": "2025-09"}))
    own = [a for a in scenario.allocations if a.team_id == team.id]
    assert f'data-testid="team-total-USD">{money(_sum(own))}<' in html
    assert money(_sum(own, category=Category.IDLE)) in html
    # Daily series: one row per day with that day's total.
    for day in {a.day for a in own}:
        assert money(_sum(own, day=day)) in html
        assert day.strftime("%a %-d %b") in html
    # Runs table: id links to the run page (quoted), cost, $/GPU-hour; waste by cause, not the
    # old failed-attempt cost (the runs browser dropped that column too).
    run = scenario.run
    assert run is not None
    run_url = reverse("web:run", args=[team.slug, run.run_id])
    assert run_url == "/runs/vision/llama/7b%20v2/"
    assert f'href="{run_url}?month=2025-09">llama/7b v2</a>' in html
    assert money(run.cost) in html
    assert money(run.cost / (run.gpu_seconds / 3600)) in html  # 50.03 per GPU-hour
    assert "Failed attempts" not in html
    assert 'data-testid="team-run-waste"' in html
    assert "asr-1" not in html  # the other team's run


def test_team_page_query_count_is_flat(
    finance_client: Client,
    scenario: Scenario,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    for i in range(25):
        RunCostFactory.create(team=scenario.team, run_id=f"extra-{i}")
    # The month's recommendations as the pipeline leaves them (a first view computes them).
    recommendations_refresh(month=scenario.month)
    # 12 for the page, plus a fixed 8 for its pricing comparison (assumptions, node types, usage,
    # team and cluster utilisation) and 6 for the recommendations (whether their inputs moved,
    # the team's), 1 for why the team has no commitment advice (the month's stored notes), 3 for
    # the waste card, 6 for the top runs' waste, the checkpoint advice and the idle showback
    # (tests/query_budgets.py: not stored in this month of factories, read at read time):
    # none grows with the number of runs.
    with django_assert_max_num_queries(
        29
        + IDLE_SHOWBACK_QUERIES
        + WASTE_CARD_QUERIES
        + CHECKPOINT_ADVICE_QUERIES
        + WASTE_PAGE_QUERIES
    ):
        html = _text(finance_client.get(reverse("web:team", args=["vision"]), {"month": "2025-09"}))
    assert "extra-24" in html


def test_run_page(finance_client: Client, scenario: Scenario) -> None:
    url = reverse("web:run", args=[scenario.team.slug, scenario.run.run_id])
    html = _text(finance_client.get(url, {"month": "2025-09"}))
    assert "llama/7b v2" in html
    assert money(scenario.run.cost) in html
    run_rows = [a for a in scenario.allocations if a.run_id == scenario.run.run_id]
    for job in scenario.jobs[:2]:
        job_rows = [a for a in run_rows if a.job_id == job.id]
        assert f"<td>{job.job_id}</td>" in html
        assert job.state in html
        assert money(_sum(job_rows)) in html
    assert "gpu-node-01, gpu-node-02" in html
    assert "8.0" in html  # 28800 GPU-seconds = 8.0 GPU-hours for job 5001
    assert "6001" not in html  # a job of another run


def test_run_page_unknown_run_is_404(finance_client: Client, scenario: Scenario) -> None:
    url = reverse("web:run", args=[scenario.team.slug, "no-such-run"])
    assert finance_client.get(url, {"month": "2025-09"}).status_code == 404


def test_run_page_query_count_is_flat(
    finance_client: Client,
    scenario: Scenario,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    url = reverse("web:run", args=[scenario.team.slug, scenario.run.run_id])
    # 10 for the page, plus a fixed 8 for the run's pricing comparison (see the team page), and
    # the run's energy (the ledger by job and node here; a fixed few more where it has jobs), its
    # attempts' waste, and what it bought: its metrics run (none here) and a kept plan (1 each).
    with django_assert_max_num_queries(22 + RUN_WASTE_QUERIES):
        assert finance_client.get(url, {"month": "2025-09"}).status_code == 200


def test_reconciliation_page_balanced(finance_client: Client, scenario: Scenario) -> None:
    html = _text(finance_client.get(reverse("web:reconciliation"), {"month": "2025-09"}))
    assert 'data-testid="difference-USD">0.00<' in html
    assert 'data-testid="difference-EUR">0.00<' in html
    assert html.count("✔ balanced") == 3
    assert money(Decimal("1200.75")) in html  # AWS account billed
    assert money(Decimal("1400.25")) in html  # AWS account cash


def test_reconciliation_page_flags_difference(finance_client: Client, scenario: Scenario) -> None:
    AllocatedCost.objects.filter(provider_name="AWS", category=Category.SHARED).delete()
    CostLineItemFactory.create(
        provider_name="CoreWeave",
        billing_account_id="cw-1",
        effective_cost=Decimal("9.99"),
        billed_cost=Decimal("9.99"),
    )
    html = _text(finance_client.get(reverse("web:reconciliation"), {"month": "2025-09"}))
    assert f'data-testid="difference-USD">{money(Decimal("150.50") + Decimal("9.99"))}<' in html
    assert html.count("✘ off by") == 2
    assert html.count("✔ balanced") == 2


def test_imports_page(
    finance_client: Client, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    ImportBatchFactory.create(source="aws-cur", row_count=1234, billing_periods=["2025-09"])
    ImportBatchFactory.create(source="gcp", status="failed", error="missing column BilledCost")
    with django_assert_max_num_queries(8):
        html = _text(finance_client.get(reverse("web:imports")))
    assert "aws-cur" in html
    assert ">1,234<" in html
    assert "2025-09" in html
    assert "missing column BilledCost" in html


def test_overview_query_count_is_flat(
    finance_client: Client,
    scenario: Scenario,
    django_assert_max_num_queries: DjangoAssertNumQueries,
) -> None:
    for i in range(20):
        TeamDailyCostFactory.create(team=TeamFactory.create(slug=f"many-{i}"), amount=Decimal(i))
    # 11: the overview's 10 and the dashboard's one read of the rollup (tests/test_overview_
    # dashboard.py holds the overview to a fixed count at any size), the waste card, the idle
    # showback and its advice.
    with django_assert_max_num_queries(
        14 + WASTE_CARD_QUERIES + IDLE_SHOWBACK_QUERIES + IDLE_ADVICE_QUERIES + ENERGY_CARD_QUERIES
    ):
        html = _text(finance_client.get(reverse("web:overview")))
    assert "Many 19" in html
