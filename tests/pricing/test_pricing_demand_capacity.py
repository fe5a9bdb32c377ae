"""Commitment advice never above the pool (issue 27): the hand-made month of
fixtures/recommendations/coreweave-oversubscribed (its README.md holds the arithmetic), where the
jobs ask for 32 GPUs of a 16-GPU CoreWeave pool every hour (a job whose end was never reported
overlaps the ones that followed it)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from finops.org.models import Team
from finops.pricing.recommendations import recommendations_compute
from tests.scenario_setup import FIXTURES, scenario_load

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]
FOLDER = FIXTURES / "recommendations" / "coreweave-oversubscribed"


def _month(tmp_path: Path) -> dict[str, Any]:
    scenario_load(FOLDER, tmp_path)
    expected: dict[str, Any] = json.loads((FOLDER / "expected.json").read_text())
    return expected


def test_commitments_count_the_gpus_the_nodes_held_and_say_when_jobs_asked_for_more(
    tmp_path: Path,
) -> None:
    expected = _month(tmp_path)
    year, month = (int(p) for p in expected["month"].split("-"))
    drafts = recommendations_compute(month=dt.date(year, month, 1))
    slugs: dict[int | None, str] = dict(Team.objects.values_list("pk", "slug"))
    found = {(slugs.get(d.team_id), d.kind, d.key): d for d in drafts}
    assert set(found) == {(e["team"], e["kind"], e["key"]) for e in expected["recommendations"]}
    for want in expected["recommendations"]:
        draft = found[(want["team"], want["kind"], want["key"])]
        assert draft.monthly_savings == Decimal(want["monthly_savings"])
        assert draft.action == want["action"]
        assert {k: draft.assumptions[k] for k in want["assumptions"]} == want["assumptions"]
        assert {k: draft.evidence[k] for k in want["evidence"]} == want["evidence"]
    # Together the teams never commit more than the pool holds.
    committed = sum(Decimal(d.evidence["gpus"]) for d in drafts if d.kind == "commit")
    assert committed <= 16


def test_a_job_with_no_end_is_not_a_short_spot_candidate(tmp_path: Path) -> None:
    """The stale job (RUNNING, End Unknown) lasts to the month's end, not zero hours."""
    from finops.pricing.recommendation_inputs import nodes_of, on_demand_runs, window_of

    _month(tmp_path)
    month = dt.date(2025, 6, 1)
    runs = {r.run_id: r for r in on_demand_runs(month, nodes_of(window_of(month)))}
    assert runs["stale"].longest_hours == 720.0
    assert all(d.kind != "spot" for d in recommendations_compute(month=month))


def test_a_savings_plan_never_covers_more_than_the_fleet() -> None:
    """AWS (a savings plan in list currency units an hour): the team held 16 p5 GPUs every hour
    of 90 days and its jobs asked for 24, on a pool of one 8-GPU node. List 2,462 / 400
    GPU-hours = 6.155 a GPU-hour, paid 2,000 / 2,462 = 0.81235 of list; ratio 0.6.
    Held 16 x 6.155 = 98.48 an hour; the fleet 8 x 6.155 = 49.24 -> 49 (whole units): the plan
    covers 49, not 98. Saves 49 x (0.81235 - 0.6) x 730 = 7,595.68 a month; it costs
    49 x 0.6 = 29.40 an hour; break-even 12 x 29.40 / (49 x 0.81235) = 8.86 months. Asked:
    24 x 6.155 = 147.72 -> 147, more than the fleet: said."""
    import numpy as np

    from finops.pricing.comparisons import assumptions_current
    from finops.pricing.models import PricingAssumptions
    from finops.pricing.recommendation_commits import commit_drafts
    from finops.pricing.recommendation_inputs import Money, window_of

    PricingAssumptions.objects.update_or_create(
        pk=1, defaults={"recommendation_percentile": 10, "reserved_ratios": {
            "1y_no_upfront": "0.6", "1y_all_upfront": "0.5", "3y_no_upfront": "0.4",
            "3y_all_upfront": "0.3"}},
    )  # fmt: skip
    span = window_of(dt.date(2025, 6, 1))
    pool = ("AWS", "p5.48xlarge", "r1", "on_demand")
    [draft] = commit_drafts(
        curves={(7, *pool): np.full(span.hours, 16.0)},
        starts={7: span.until - dt.timedelta(days=95)},
        rates={(7, "USD", *pool): Money(Decimal(2000), Decimal(2462), Decimal(400))},
        quotes={}, a=assumptions_current(), window=span,
        requested={(7, *pool): np.full(span.hours, 24.0)}, capacity={pool: 8},
    )  # fmt: skip
    assert draft.monthly_savings == Decimal("7595.68")
    assert draft.evidence["covers_per_hour"] == "49"
    assert draft.evidence["fleet_per_hour"] == "49"
    assert draft.evidence["requested_per_hour"] == "147"
    assert draft.action == (
        "Commit 29.40 USD an hour to an AWS Savings Plan for 1 year, no upfront (it covers "
        "49.00 USD an hour of on-demand p5.48xlarge): saves 7,595.68 USD a month at the P10 "
        "demand of the last 90 days; break-even after 8.9 months. Its jobs asked for 147.00 USD "
        "an hour of on-demand use at P10, more than the fleet's 49.00 USD an hour: the advice "
        "counts the GPUs the nodes could hold."
    )
