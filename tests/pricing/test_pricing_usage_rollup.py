"""The month's usage per team and instance type stored by the pricing step (TeamTypeUsage,
issue 27), and the GPU cost of jobs and idle behind the measured cluster utilisation
(TeamUsageMonth): the pricing page reads them instead of summing the ledger, gives the same
figures, and goes back to the ledger once the month is attributed again.

Data: the golden runs of tests/pricing_golden.py, one team each, 8 GPU-hours of p5.48xlarge
(us-east-1) on 2025-06-03 with ListCost 80.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from finops.attribution.services import attribution_month_run
from finops.org.models import Team
from finops.pricing.comparisons import team_month_pricing
from finops.pricing.models import TeamTypeUsage, TeamUsageMonth
from finops.pricing.month_step import recommendations_month_step
from tests.pricing_golden import MONTH

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]


def _bodies() -> dict[str, dict[str, object]]:
    found = team_month_pricing(month=MONTH, teams=Team.objects.all(), org_wide=True)
    return {body["team"]: body for body in found}


def test_the_stored_usage_gives_the_ledgers_figures(priced_month: None) -> None:
    live = _bodies()
    result = recommendations_month_step(MONTH, None)
    assert result.summary["usage_rows"] == 4
    rows = TeamTypeUsage.objects.filter(billing_period=MONTH, team__slug="od")
    assert list(rows.values_list("provider", "instance_type", "region", "currency")) == [
        ("AWS", "p5.48xlarge", "us-east-1", "USD")
    ]
    # 8 GPUs for one hour: 28,800 GPU-seconds; ListCost 80; all of it priced.
    assert rows.get().gpu_seconds == Decimal(28800)
    assert (rows.get().listed, rows.get().unpriced) == (Decimal(80), Decimal(0))
    assert _bodies() == live


def test_the_page_reads_the_stored_rows_until_the_month_is_attributed_again(
    priced_month: None,
) -> None:
    recommendations_month_step(MONTH, None)
    # A stored row changed by hand shows: the figures come from the stored rows.
    TeamTypeUsage.objects.filter(billing_period=MONTH, team__slug="od").update(listed=160)
    assert _bodies()["od"]["on_demand"]["cost"] == "160.00"  # type: ignore[index]
    # Attributed again (a newer attribution than the one summed): the ledger's figure.
    attribution_month_run(month=MONTH)
    assert TeamUsageMonth.objects.get(billing_period=MONTH).attributed_at is not None
    assert _bodies()["od"]["on_demand"]["cost"] == "80.00"  # type: ignore[index]


def _cluster_on_prem(team: str) -> object:
    return _bodies()[team]["on_prem"]["cluster"]  # type: ignore[index]


def test_the_stored_cluster_utilisation_gives_the_ledgers_figure(priced_month: None) -> None:
    """The four runs' jobs paid 80 + 30 + 50 + 50 = 210 and no GPU stood idle: utilisation 1,
    so the od run's 8 GPU-hours cost 8 x 2.00 (the golden on-prem rate) = 16.00 on premises at
    the cluster's utilisation, stored or summed."""
    live = _cluster_on_prem("od")
    assert live == {"cost": "16.00", "utilisation": "1.0000"}
    recommendations_month_step(MONTH, None)
    stored = TeamUsageMonth.objects.get(billing_period=MONTH)
    assert (stored.gpu_jobs_cost, stored.gpu_idle_cost) == (Decimal(210), Decimal(0))
    assert _cluster_on_prem("od") == live


def test_the_page_reads_the_stored_cluster_utilisation_until_attributed_again(
    priced_month: None,
) -> None:
    recommendations_month_step(MONTH, None)
    # Stored idle cost changed by hand to the jobs' 210: utilisation 0.5, the cost doubles.
    TeamUsageMonth.objects.filter(billing_period=MONTH).update(gpu_idle_cost=210)
    assert _cluster_on_prem("od") == {"cost": "32.00", "utilisation": "0.5000"}
    # A month stored before the costs were (null): the ledger's figure.
    TeamUsageMonth.objects.filter(billing_period=MONTH).update(gpu_idle_cost=None)
    assert _cluster_on_prem("od") == {"cost": "16.00", "utilisation": "1.0000"}
    # Attributed again after the step stored it: the ledger's figure too.
    TeamUsageMonth.objects.filter(billing_period=MONTH).update(gpu_idle_cost=210)
    attribution_month_run(month=MONTH)
    assert _cluster_on_prem("od") == {"cost": "16.00", "utilisation": "1.0000"}
