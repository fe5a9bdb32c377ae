"""Why a team has no commitment advice (issue 27): said on the pricing and team pages instead of
nothing. Curves are GPUs held per hour (finops.pricing.recommendation_inputs), worked by hand:
June 2025, the window's 90 days end 2025-07-01; percentile 10 (the default)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.test import Client

from finops.org.models import Profile
from finops.pricing.comparisons import assumptions_current
from finops.pricing.demand import Curve
from finops.pricing.recommendation_commits import commit_notes
from finops.pricing.recommendation_inputs import DemandKey, window_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_catalogue")]

MONTH = dt.date(2025, 6, 1)


def _notes(curves: dict[tuple[int, str], Curve], days: int = 95) -> dict[int | None, str]:
    window = window_of(MONTH)
    keyed: dict[DemandKey, Curve] = {
        (team, "AWS", "g5.xlarge", "r1", mix): c for (team, mix), c in curves.items()
    }
    starts: dict[int | None, dt.datetime] = {
        team: window.until - dt.timedelta(days=days) for team, _ in curves
    }
    notes = commit_notes(
        curves=keyed, starts=starts, drafts=[], a=assumptions_current(), window=window
    )
    return {note.team_id: note.text for note in notes}


def test_a_spot_only_team_used_no_gpu_in_most_hours_no_steady_use() -> None:
    """Team 1 held 8 spot GPUs in one hour of every ten (a tenth of the hours: 216 of 2,160),
    none in the others: P10 0 GPUs, mean 0.8."""
    hours = window_of(MONTH).hours
    curve = np.zeros(hours)
    curve[::10] = 8.0
    assert _notes({(1, "spot"): curve})[1] == (
        "No commitment advice: no steady use: P10 demand 0 GPUs over the last 90 days (no GPU "
        "in use in at least 10 % of the hours, mean 0.8 GPUs); a commitment would stand idle."
    )


def test_steady_use_on_spot_only_has_nothing_on_demand_to_commit() -> None:
    """Team 2 held 4 spot GPUs every hour and 2 on-demand GPUs in one hour of two: P10 of all
    its use 4 GPUs, of the on-demand part 0."""
    hours = window_of(MONTH).hours
    on_demand = np.zeros(hours)
    on_demand[::2] = 2.0
    text = _notes({(2, "spot"): np.full(hours, 4.0), (2, "on_demand"): on_demand})[2]
    assert text == (
        "No commitment advice: its steady use (P10 demand 4 GPUs over the last 90 days) runs "
        "on spot nodes, not on demand: nothing to commit."
    )


def test_too_short_a_history() -> None:
    hours = window_of(MONTH).hours
    text = _notes({(3, "on_demand"): np.full(hours, 4.0)}, days=20)[3]
    assert text == "No commitment advice: under 30 days of demand history (first job 2025-06-11)."


def test_the_pricing_and_team_pages_say_why_there_is_no_commitment_advice(
    client: Client, priced_month: None
) -> None:
    """The golden runs: each team's one job on 2025-06-03, too short a history to commit."""
    user = User.objects.create_user("fin", password="fin-password-123")
    Profile.objects.create(user=user, role=Profile.Role.FINANCE)
    client.force_login(user)
    page = client.get("/pricing/?month=2025-06").content.decode()
    notes = page.split('data-testid="recommendation-notes">')[1].split("</ul>")[0]
    expected = "under 30 days of demand history (first job 2025-06-03)."
    for team in ("cud-run", "od-run", "ri-run", "spot-run"):
        assert f"<li>{team}: No commitment advice: {expected}</li>" in notes
    team_page = client.get("/teams/od/?month=2025-06").content.decode()
    assert f"<li>No commitment advice: {expected}</li>" in team_page
