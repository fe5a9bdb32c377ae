"""GET /metrics (issue 33 item 3): Prometheus text, read back with prometheus_client's own
parser, on the month scenario of tests/factories.py (build_month_scenario), whose figures are
worked by hand in its docstring and comments:

- amortised (ledger) 2025-09: vision AWS training 400.25 + 100.00 = 500.25, tagged 50.00,
  GCP idle 100.00; speech AWS training 300.00, GCP inference 200.125; no team: AWS shared
  150.50, idle 120.00, unallocated 80.00 (USD), Azure unallocated 50 EUR.
- invoiced (BilledCost): AWS 111111111111 1200.00 + 200.25 = 1400.25 USD, GCP billing-1 300.125
  USD, Azure az-1 50 EUR.
- waste by cause (the stored run economics, finops.economics, refreshed as the pipeline does
  after attribution): vision's run llama/7b v2 abandoned 100.00 (its FAILED attempt 5002, which
  no attempt of the run started after: never resumed), every other cause 0; speech's asr-1
  (COMPLETED) 0 for every cause.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import promql_parser
import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from pytest_django import DjangoCaptureOnCommitCallbacks
from rest_framework.test import APIClient

from billing_ingest.models import CostLineItem, ImportBatch
from finops.attribution.models import AllocatedCost, AttributionRun, TeamDailyCost
from finops.budgets.models import Budget, BudgetEvaluation
from finops.budgets.services import budget_evaluation_refresh
from finops.economics.services import economics_refresh
from finops.org.models import Team
from finops.org.services import data_version_bump
from finops.tokens.services import api_token_create
from tests.factories import Scenario

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "finops.json"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(key: str) -> tuple[str, Samples]:
    response = APIClient().get("/metrics", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    text = response.content.decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return text, samples


def _cost(team: str, provider: str, category: str, currency: str = "USD") -> tuple[str, frozenset]:
    labels = {"team": team, "provider": provider, "category": category, "month": "2025-09"}
    return "finops_amortised_cost", frozenset({**labels, "currency": currency}.items())


def _of(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: value for (n, labels), value in samples.items() if n == name}


@pytest.fixture
def finance_key(finance_user: object) -> str:
    return api_token_create(user=finance_user, name="prometheus", read_only=True).key  # type: ignore[arg-type]


@pytest.fixture
def budget(scenario: Scenario, team: Team) -> Budget:
    budget = Budget.objects.create(
        name="Vision GPUs", team=team, period="month", amount=Decimal("1000.00"), currency="USD"
    )
    budget_evaluation_refresh(budget_id=budget.pk)
    return budget


def test_finance_scrape_parses_and_carries_the_hand_worked_figures(
    scenario: Scenario, budget: Budget, finance_key: str
) -> None:
    economics_refresh(month=dt.date(2025, 9, 1))
    text, samples = _scrape(finance_key)

    assert _of(samples, "finops_amortised_cost") == {
        _cost("vision", "AWS", "training")[1]: 500.25,
        _cost("vision", "AWS", "tagged")[1]: 50.0,
        _cost("vision", "GCP", "idle")[1]: 100.0,
        _cost("speech", "AWS", "training")[1]: 300.0,
        _cost("speech", "GCP", "inference")[1]: 200.125,
        _cost("none", "AWS", "shared")[1]: 150.5,
        _cost("none", "AWS", "idle")[1]: 120.0,
        _cost("none", "AWS", "unallocated")[1]: 80.0,
        _cost("none", "Azure", "unallocated", "EUR")[1]: 50.0,
    }
    # Exact decimals, never an exponent nor a float's tail.
    assert 'finops_amortised_cost{team="speech",provider="GCP",category="inference",' in text
    assert re.search(r'category="inference",month="2025-09",currency="USD"} 200\.125\n', text)
    assert not re.search(r"\d[eE][+-]?\d", text)

    idle = {dict(k)["team"]: v for k, v in _of(samples, "finops_idle_cost").items()}
    assert idle == {"vision": 100.0, "none": 120.0}
    invoiced = {
        (dict(k)["provider"], dict(k)["account"], dict(k)["currency"]): v
        for k, v in _of(samples, "finops_invoiced_cost").items()
    }
    assert invoiced == {
        ("AWS", "111111111111", "USD"): 1400.25,
        ("GCP", "billing-1", "USD"): 300.125,
        ("Azure", "az-1", "EUR"): 50.0,
    }
    waste = {
        (dict(k)["team"], dict(k)["cause"]): v for k, v in _of(samples, "finops_waste_cost").items()
    }
    causes = ("rework", "restart", "abandoned", "cancelled", "idle_in_allocation")
    assert waste == {
        **{("vision", c): 0.0 for c in causes},
        ("vision", "abandoned"): 100.0,
        **{("speech", c): 0.0 for c in causes},
    }

    evaluation = BudgetEvaluation.objects.get(budget=budget)
    labels = frozenset(
        {"budget_id": str(budget.pk), "budget": "Vision GPUs", "team": "vision",
         "period": "month", "period_start": "2025-09-01", "currency": "USD"}.items()
    )  # fmt: skip
    assert samples[("finops_budget_amount", labels)] == 1000.0
    # Vision's month to date: 500.25 + 50.00 + 100.00.
    assert samples[("finops_budget_spent", labels)] == 650.25
    assert samples[("finops_budget_forecast", labels)] == float(evaluation.forecast)
    assert evaluation.forecast > evaluation.actual


def test_freshness_names_the_last_import_and_attribution_and_stale_months(
    scenario: Scenario, finance_key: str
) -> None:
    _, samples = _scrape(finance_key)
    # Line items, never attributed: the month is stale (reconciliation's month_staleness).
    assert samples[("finops_month_stale", frozenset({("month", "2025-09")}))] == 1
    assert samples[("finops_stale_months", frozenset())] == 1
    assert _of(samples, "finops_last_attribution_timestamp_seconds") == {}

    assert _of(samples, "finops_last_import_timestamp_seconds") == {}  # none finished
    imported = dt.datetime(2025, 10, 2, 6, 0, tzinfo=dt.UTC)
    ImportBatch.objects.update(finished_at=imported)
    finished = dt.datetime(2025, 10, 2, 6, 30, tzinfo=dt.UTC)
    AttributionRun.objects.create(
        billing_period=dt.date(2025, 9, 1),
        status=AttributionRun.Status.SUCCEEDED,
        finished_at=finished,
        inputs_at=dt.datetime.now(tz=dt.UTC),
    )
    text, samples = _scrape(finance_key)

    assert samples[("finops_month_stale", frozenset({("month", "2025-09")}))] == 0
    assert samples[("finops_stale_months", frozenset())] == 0
    assert samples[("finops_last_attribution_timestamp_seconds", frozenset())] == 1759386600
    assert "finops_last_attribution_timestamp_seconds 1759386600\n" in text
    last_import = ("finops_last_import_timestamp_seconds", frozenset({("kind", "billing")}))
    assert samples[last_import] == 1759384800


def test_a_lead_token_scrapes_only_the_leads_teams(
    scenario: Scenario, budget: Budget, lead_user: object
) -> None:
    key = api_token_create(user=lead_user, name="grafana", read_only=True).key  # type: ignore[arg-type]

    _, samples = _scrape(key)

    teams = {dict(k)["team"] for (n, k) in samples if n.startswith("finops_") and "team" in dict(k)}
    assert teams == {"vision"}
    assert _of(samples, "finops_invoiced_cost") == {}
    assert sum(_of(samples, "finops_amortised_cost").values()) == 650.25


def test_metrics_need_an_api_token(scenario: Scenario, finance_client: Client) -> None:
    assert APIClient().get("/metrics").status_code == 401
    # A browser session is not enough: Prometheus scrapes with a token.
    assert finance_client.get("/metrics").status_code == 401
    wrong = APIClient().get("/metrics", HTTP_AUTHORIZATION="Token fo_not-a-key")
    assert wrong.status_code == 401


def _dashboard_queries() -> tuple[list[str], list[tuple[str, str]]]:
    """The panels' PromQL, and the variables' label_values(selector, label) (a Grafana
    function, not PromQL: its selector is)."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    variables = []
    for variable in dashboard["templating"]["list"]:
        found = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["definition"])
        assert found is not None, variable["definition"]
        variables.append((found[1], found[2]))
    return queries, variables


Uses = list[tuple[str, set[str]]]


def _uses(node: Any, grouping: frozenset[str] = frozenset()) -> Uses:
    """(metric, labels the query needs on it) for each selector of a parsed PromQL query: the
    labels it matches on, and those of every `by (...)` around it."""
    if isinstance(node, promql_parser.VectorSelector):
        matched = {m.name for m in node.matchers.matchers}
        assert node.name is not None, node  # every query names its metric
        return [(node.name, matched | set(grouping))]
    if isinstance(node, promql_parser.AggregateExpr):
        modifier = node.modifier
        labels: set[str] = set()
        if modifier is not None and modifier.type == promql_parser.AggModifierType.By:
            labels = set(modifier.labels)
        return _uses(node.expr, grouping | labels)
    if isinstance(node, promql_parser.BinaryExpr):
        return _uses(node.lhs, grouping) + _uses(node.rhs, grouping)
    if isinstance(node, promql_parser.Call):
        return [use for arg in node.args for use in _uses(arg, grouping)]
    if isinstance(node, promql_parser.ParenExpr):
        return _uses(node.expr, grouping)
    assert isinstance(node, promql_parser.NumberLiteral | promql_parser.StringLiteral), node
    return []


def test_every_metric_and_label_the_grafana_dashboard_uses_is_exposed(
    scenario: Scenario, budget: Budget, finance_key: str
) -> None:
    AttributionRun.objects.create(
        billing_period=dt.date(2025, 9, 1),
        status=AttributionRun.Status.SUCCEEDED,
        finished_at=dt.datetime(2025, 10, 2, tzinfo=dt.UTC),
    )
    ImportBatch.objects.update(finished_at=dt.datetime(2025, 10, 1, tzinfo=dt.UTC))
    # The jobs ran on an AWS H100 node in us-east-1: their energy is estimated from its power.
    AllocatedCost.objects.filter(job__isnull=False).update(node="gpu-node-01")
    CostLineItem.objects.filter(provider_name="AWS").update(
        resource_name="gpu-node-01", x_instance_type="p5.48xlarge", region_id="us-east-1"
    )
    economics_refresh(month=dt.date(2025, 9, 1))  # the pipeline's step after attribution
    _, samples = _scrape(finance_key)
    exposed: dict[str, set[str]] = {}
    for name, pairs in samples:
        exposed.setdefault(name, set()).update(k for k, _ in pairs)

    queries, variables = _dashboard_queries()
    uses = [use for query in queries for use in _uses(promql_parser.parse(query))]
    for selector, label in variables:
        uses += [(name, labels | {label}) for name, labels in _uses(promql_parser.parse(selector))]

    assert {name for name, _ in uses} == set(exposed)  # each metric shown, none unknown
    for name, labels in uses:
        assert labels <= exposed[name], (name, labels - exposed[name])


def test_money_figures_are_cached_by_data_version_and_freshness_is_live(
    scenario: Scenario,
    finance_key: str,
    settings: Any,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.FINOPS_API_CACHE_SECONDS = 300
    cost = _cost("vision", "AWS", "training")
    stale = ("finops_month_stale", frozenset({("month", "2025-09")}))
    _, first = _scrape(finance_key)
    TeamDailyCost.objects.filter(team__slug="vision", category="training").update(
        amount=Decimal("1.00")
    )
    AttributionRun.objects.create(
        billing_period=dt.date(2025, 9, 1),
        status=AttributionRun.Status.SUCCEEDED,
        finished_at=dt.datetime(2025, 10, 2, tzinfo=dt.UTC),
        inputs_at=dt.datetime.now(tz=dt.UTC),
    )

    _, cached = _scrape(finance_key)
    with django_capture_on_commit_callbacks(execute=True):
        data_version_bump()  # what every write of the ledger does after its commit
    _, fresh = _scrape(finance_key)

    assert (first[cost], first[stale]) == (500.25, 1)
    assert (cached[cost], cached[stale]) == (500.25, 0)  # freshness is read at every scrape
    assert fresh[cost] == 2.0  # two days of 1.00
