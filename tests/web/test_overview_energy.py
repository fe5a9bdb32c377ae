"""The overview's energy and carbon card (issue 32) beside the waste card, on the hand-worked
scenario fixtures/scenarios/focus-slurm-energy: vision 2.6 GPU kWh measured -> 2.951 facility
kWh -> 1.090315 kg CO2e; speech 1.4 estimated -> 1.589 -> 0.587093 (README.md there)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from finops.org.models import Profile, Team
from tests.energy_inputs import energy_month

pytestmark = pytest.mark.django_db


def test_finance_sees_the_months_energy_of_every_team(client: Client, finance_user: User) -> None:
    energy_month()
    client.force_login(finance_user)
    page = client.get("/", {"month": "2025-06"}).content.decode()
    assert page.index("Waste by cause") < page.index("Energy and carbon")
    # 2.951 + 1.589 facility kWh; 1.090315 + 0.587093 kg; 2.6 of 4.0 GPU kWh measured.
    assert 'data-testid="energy-facility-kwh">4.54 kWh<' in page
    assert 'data-testid="energy-co2e">1.68 kg CO2e<' in page
    assert 'data-testid="energy-measured-share">65.0 %<' in page
    assert "partly estimated" in page
    assert "(grid 2023)" in page
    # Each figure that holds speech's estimate says so, the GPU energy too (h-pages: it did not).
    card = page[page.index('data-testid="energy-card"') :]
    card = card[: card.index("</div>\n</div>")]
    assert card.count("partly estimated") == 3, card
    assert 'GPU energy, partly estimated</span><span class="value" data-testid="energy-gpu' in card


def test_a_lead_sees_the_energy_of_their_team_only(client: Client) -> None:
    energy_month()
    lead = User.objects.create_user("vision-lead")
    profile = Profile.objects.create(user=lead, role=Profile.Role.TEAM_LEAD)
    profile.teams.add(Team.objects.get(slug="vision"))
    client.force_login(lead)
    page = client.get("/", {"month": "2025-06"}).content.decode()
    assert 'data-testid="energy-facility-kwh">2.95 kWh<' in page
    assert 'data-testid="energy-co2e">1.09 kg CO2e<' in page
    assert 'data-testid="energy-measured-share">100.0 %<' in page
    # All measured: no figure is called an estimate.
    card = page[page.index('data-testid="energy-card"') :]
    assert "estimated" not in card[: card.index("</div>\n</div>")]
    assert '<span class="label">GPU energy</span>' in card


def test_a_month_without_energy_says_so(client: Client, finance_user: User) -> None:
    client.force_login(finance_user)
    page = client.get("/", {"month": "2025-06"}).content.decode()
    assert "No GPU energy for the runs of June 2025." in page
