"""The waste card of the overview and team pages as a finance person reads it (h-pages, issue
29's screenshots): every money figure names its currency, a month without runs says so instead
of "0.00 wasted", and the table's * is explained. On the hand-worked scenario
fixtures/scenarios/focus-slurm-waste (June 2025, nothing before it; speech's parts estimated)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from tests.scenario_setup import waste_month_attributed

pytestmark = pytest.mark.django_db


def _card(page: str) -> str:
    start = page.index("<h2>Waste by cause</h2>")
    return page[start : page.index("<h2>", start + 10)]


def test_months_without_runs_are_not_zero_waste(tmp_path: Path, finance_client: Client) -> None:
    waste_month_attributed(tmp_path)
    card = _card(finance_client.get("/", {"month": "2025-06"}).content.decode())
    trend = card[card.index('data-testid="waste-trend-USD"') :]
    trend = trend[trend.index("Months before") : trend.index("</p>")]
    assert (
        "Months before: March 2025 no run cost · April 2025 no run cost · May 2025 no run cost."
        in trend
    )
    assert "0.00 USD" not in trend


def test_every_figure_names_its_currency_and_the_star_is_explained(
    tmp_path: Path, finance_client: Client
) -> None:
    waste_month_attributed(tmp_path)
    card = _card(finance_client.get("/", {"month": "2025-06"}).content.decode())
    for label in ("Rework (USD)", "Restart (USD)", "Abandoned (USD)",
                  "Idle in allocation (USD)", "Cancelled, apart (USD)"):  # fmt: skip
        assert f'<span class="label">{label}' in card, label
    assert '<th class="num">Run cost (USD)</th>' in card
    assert '<th class="num">Waste (USD)</th>' in card
    # Speech's rework and restart are estimated (no run metrics): starred and explained.
    assert "*</td>" in card
    assert 'data-testid="waste-estimate-note-USD">* partly estimated' in card
