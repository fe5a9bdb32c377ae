"""Why a reserved figure can be above on demand (issue 27): the comparison prices a reservation
sized to the team's peak day, paid every hour, so at a low utilisation (mean / peak GPUs in use)
it costs more than on demand; the body and the page say so, with the peak and the share used.

Data: the golden runs of tests/pricing_golden.py. od-run: 8 GPU-hours on 2025-06-03, on demand
80 (ListCost). Its team's window runs from that day to 2025-07-01: 28 days, of which the peak
day holds 8 x 3600 GPU-seconds = 1/3 GPU over the day, the mean 1/28 of that: utilisation 1/28.
Reserved 1 year, no upfront = 80 x 0.6 / (1/28) = 1,344.00 > 80.00.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from finops.attribution.models import RunCost
from finops.org.models import Profile
from finops.pricing.comparison import TypeUsage, compare
from finops.pricing.comparisons import assumptions_current

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]


def _finance() -> User:
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    return user


def test_a_reservation_sized_to_a_rare_peak_costs_more_than_on_demand_and_says_why(
    priced_month: None,
) -> None:
    api = APIClient()
    api.force_authenticate(_finance())
    cost = RunCost.objects.get(run_id="od-run")
    body = api.get(f"/api/v1/runs/{cost.pk}/pricing/").json()
    reserved = body["reserved_1y"]
    assert (body["on_demand"]["cost"], reserved["cost"]) == ("80.00", "1344.00")
    assert reserved["utilisation"] == "0.0357"
    assert reserved["peak_gpus"] == "0.3"
    assert reserved["dearer_than_on_demand"] is True
    assert reserved["basis"] == (
        "reserved for the team's peak day (0.3 GPUs) every hour of the 1-year term; the team "
        "used 4 % of it: at that utilisation the reservation costs more than on demand; a "
        "commitment sized to the steady part of the use (the commitment advice) costs less"
    )


def test_the_pricing_page_shows_the_peak_and_the_share_used_beside_reserved(
    client: Client, priced_month: None
) -> None:
    client.force_login(_finance())
    page = client.get("/pricing/?month=2025-06").content.decode()
    cell = page.split("<td>od-run</td><td>USD</td>")[1].split('data-testid="reserved-1y">')[1]
    cell = cell.split("</td>")[0]
    assert cell.startswith("1,344.00")
    assert "0.3 GPUs (peak day), used 3.6 %" in cell
    assert "above on demand: paid for the peak every hour" in cell


def _usage(on_demand: str) -> list[TypeUsage]:
    return [
        TypeUsage(
            provider="AWS", instance_type="p5.48xlarge", region="r1",
            on_demand=Decimal(on_demand), gpu_hours=Decimal(100), gpus_per_node=8,
        )
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("utilisation", "cost", "dearer"),
    # 1,000 on demand x the default configured 0.70 (no catalogue) / utilisation.
    [(Decimal(1), "700.00", False), (Decimal("0.7"), "1000.00", False),
     (Decimal("0.5"), "1400.00", True)],
)  # fmt: skip
def test_reserved_is_below_on_demand_when_the_use_is_steady(
    utilisation: Decimal, cost: str, dearer: bool
) -> None:
    body = compare(
        actual=Decimal(1000), on_demand_estimated=Decimal(0), mix={}, usage=_usage("1000"),
        assumptions=assumptions_current(), team_utilisation=utilisation,
        cluster_utilisation=None, currency="USD", peak_gpus=Decimal(8),
    )  # fmt: skip
    reserved = body["reserved_1y"]
    assert reserved["cost"] == cost
    assert reserved["dearer_than_on_demand"] is dearer
    assert reserved["basis"].startswith("reserved for the team's peak day (8.0 GPUs)")
