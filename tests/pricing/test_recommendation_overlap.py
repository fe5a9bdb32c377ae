"""One saving per cost (docs/pricing.md): an inference endpoint's pods are advised by the
endpoint advice (rightsize), not by the idle-allocation recommendation too, on the hand-worked
scenario fixtures/scenarios/eks-endpoint-advice (README.md there): speech's endpoint pod
`chat-0` (800 USD at a measured 15 %: 680.00 idle) beside its training pod `train-0` (400 USD
at 50 %: 200.00 idle) on cluster eks. And the partial overlaps of a checkpoint or spot saving
with the idle allocation of the same jobs, counted once in the headline total (pure)."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from django.test import Client

from finops.economics.advice import stored_advice
from finops.org.models import Team
from finops.pricing.models import Recommendation
from finops.pricing.recommendation_overlaps import open_savings_totals, overlaps_stamped
from finops.pricing.recommendation_rules import RIGHTSIZE_UTILISATION, Draft
from finops.pricing.recommendations import recommendations_refresh
from finops.waste.advice import ENDPOINT
from tests.scenario_setup import SCENARIOS, scenario_load

FOLDER = SCENARIOS / "eks-endpoint-advice"
MONTH = date(2025, 6, 1)

pytestmark = pytest.mark.django_db


@pytest.fixture
def scene(tmp_path: Path) -> None:
    scenario_load(FOLDER, tmp_path, months=["2025-06"])


def _open() -> dict[tuple[str, str], Decimal]:
    slugs: dict[int | None, str] = dict(Team.objects.values_list("id", "slug"))
    rows = Recommendation.objects.filter(billing_period=MONTH, status="open")
    return {(slugs[r.team_id], r.key): r.monthly_savings for r in rows}


def test_the_endpoint_would_have_produced_both(scene: None) -> None:
    """The endpoint's pods qualify for both: measured under the rightsize threshold, and with
    idle allocated GPU time over the floor, in the advice rows the pages read."""
    rows = stored_advice(month=MONTH)
    assert rows is not None
    endpoint = [r for r in rows if r.pricing == ENDPOINT]
    assert len(endpoint) == 1
    assert endpoint[0].measured_utilisation is not None
    assert endpoint[0].measured_utilisation <= RIGHTSIZE_UTILISATION
    assert endpoint[0].idle_in_allocation == Decimal("680")
    assert endpoint[0].monthly_saving == 0
    assert endpoint[0].optimal_interval_minutes is None
    # Every row's idle, the endpoint's too: what the idle recommendation used to carry.
    assert sum((r.idle_in_allocation for r in rows), Decimal(0)) == Decimal("880")


def test_the_total_counts_each_idle_gpu_hour_once(scene: None, finance_client: Client) -> None:
    recommendations_refresh(month=MONTH)
    # README.md: rightsize 800 x (1 - 1.861 / 6.88) = 583.60; the idle allocation is the
    # training pod's alone, 400 x 0.5 = 200.00 (880.00 before the rule).
    assert _open() == {
        ("speech", "endpoint:chat"): Decimal("583.60"),
        ("speech", "allocation:eks"): Decimal("200.00"),
    }
    idle = Recommendation.objects.get(billing_period=MONTH, key="allocation:eks")
    assert idle.evidence["runs_cost"] == "400.00"
    assert idle.title == "Jobs on eks used 50 % of their GPUs"
    page = finance_client.get("/pricing/", {"month": "2025-06"}).content.decode()
    said = re.search(r'data-testid="savings-total">Open recommendations save ([^<]*) a month', page)
    assert said is not None
    assert said.group(1) == "783.60 USD"  # 583.60 + 200.00, not 583.60 + 880.00
    assert "783.60 USD a month: an estimate, each row priced with" in page
    assert "counted once" not in page  # no overlap between these two: nothing netted


def test_the_team_page_still_shows_the_endpoints_idle(scene: None, finance_client: Client) -> None:
    page = finance_client.get("/teams/speech/", {"month": "2025-06"}).content.decode()
    table = page[page.index('data-testid="checkpoint-advice"') :]
    row = table[table.index('data-pricing="endpoint"') :]
    row = row[: row.index("</tr>")]
    assert "advises the GPUs they held idle" in row
    assert "680.00 USD of allocated GPU time was idle" in row
    assert " min " not in row  # no checkpoint interval for a server


# --- the partial overlaps (pure): checkpoint and spot savings on jobs with idle GPUs -----------


def _draft(team: int, kind: str, key: str, saving: str, evidence: dict[str, object]) -> Draft:
    return Draft(
        team_id=team, kind=kind, key=key, title=key, action="", currency="USD",
        monthly_savings=Decimal(saving), confidence="low", assumptions={}, evidence=evidence,
    )  # fmt: skip


def _drafts() -> list[Draft]:
    """Team 1 on hpc: 1,000 USD of measured jobs, 250.00 idle (s = 0.25); a checkpoint saving
    of 40.00 there, a spot saving of 600.00 there and 100.00 on gke (no idle advice on gke).
    Team 2's idle allocation on hpc (100 of 400) is not team 1's."""
    return [
        _draft(1, "idle", "allocation:hpc", "250.00", {"cluster": "hpc", "runs_cost": "1000.00"}),
        _draft(1, "checkpoint", "checkpoint:hpc:on_demand", "40.00", {"cluster": "hpc"}),
        _draft(1, "spot", "short-training-runs", "700.00",
               {"savings_by_cluster": {"gke": "100.00", "hpc": "600.00"}}),
        _draft(2, "idle", "allocation:hpc", "100.00", {"cluster": "hpc", "runs_cost": "400.00"}),
    ]  # fmt: skip


def test_an_overlap_is_the_partners_saving_times_the_idle_share() -> None:
    stamped = {(d.team_id, d.key): d for d in overlaps_stamped(_drafts())}
    # With the idle quarter released, the same jobs cost 3/4: 40 x 0.25 = 10.00 of the
    # checkpoint saving and 600 x 0.25 = 150.00 of the spot one are the idle advice's too.
    assert stamped[(1, "checkpoint:hpc:on_demand")].assumptions["overlap_with"] == [
        {"kind": "idle", "key": "allocation:hpc", "amount": "10.00", "idle_share": "0.2500"}
    ]
    assert stamped[(1, "short-training-runs")].assumptions["overlap_with"] == [
        {"kind": "idle", "key": "allocation:hpc", "amount": "150.00", "idle_share": "0.2500"}
    ]
    assert "overlap_with" not in stamped[(1, "allocation:hpc")].assumptions
    assert "overlap_with" not in stamped[(2, "allocation:hpc")].assumptions
    # The savings themselves are untouched: each is right on its own.
    assert [d.monthly_savings for d in stamped.values()] == [
        Decimal("250.00"), Decimal("40.00"), Decimal("700.00"), Decimal("100.00")
    ]  # fmt: skip


def _rows(dismissed: set[tuple[int, str]]) -> list[Recommendation]:
    return [
        Recommendation(
            team_id=d.team_id, kind=d.kind, key=d.key, currency=d.currency,
            monthly_savings=d.monthly_savings, assumptions=d.assumptions,
            status="dismissed" if (d.team_id, d.key) in dismissed else "open",
        )
        for d in overlaps_stamped(_drafts())
    ]  # fmt: skip


def test_the_headline_counts_an_overlap_once_while_both_are_open() -> None:
    # 250 + 40 + 700 + 100 = 1,090, less the overlaps 10 + 150: 930.00.
    assert open_savings_totals(_rows(set())) == [("USD", Decimal("930.00"))]
    # Team 1's idle advice dismissed: nothing to overlap, 40 + 700 + 100 = 840.00.
    assert open_savings_totals(_rows({(1, "allocation:hpc")})) == [("USD", Decimal("840.00"))]
    # The spot advice dismissed: 250 + 40 + 100 - 10 = 380.00.
    assert open_savings_totals(_rows({(1, "short-training-runs")})) == [("USD", Decimal("380.00"))]
