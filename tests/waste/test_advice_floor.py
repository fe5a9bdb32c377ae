"""The materiality floor of the waste advice (FINOPS_ADVICE_MIN_MONTHLY_SAVING, default 25 in
the recommendation's currency): a checkpoint or idle-allocation saving under it is no open
recommendation, one at or over it is; the team page still shows the figure. On the hand-worked
scenario fixtures/scenarios/focus-slurm-waste (README.md there, "What to change"): vision's
checkpoint advice saves 2.44 USD a month (340 x 0.007191, a little under 2.445), speech's idle
allocation 25.00 USD."""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from django.test import Client, override_settings

from finops.economics.advice import stored_advice, stored_waste_drafts
from finops.org.models import Team
from finops.pricing.models import Recommendation
from finops.pricing.recommendations import recommendations_current, recommendations_refresh
from finops.waste.recommendations import waste_drafts
from tests.scenario_setup import waste_month_attributed

MONTH = date(2025, 6, 1)
CHECKPOINT = ("vision", "checkpoint", "checkpoint:hpc:on_demand")
IDLE = ("speech", "idle", "allocation:hpc")

pytestmark = pytest.mark.django_db


def _made() -> dict[tuple[str, str, str], Decimal]:
    slugs: dict[int | None, str] = dict(Team.objects.values_list("id", "slug"))
    drafts = stored_waste_drafts(month=MONTH)
    assert drafts == waste_drafts(month=MONTH)
    return {(slugs[d.team_id], d.kind, d.key): d.monthly_savings for d in drafts}


def test_the_default_floor_is_25_and_keeps_only_the_idle_allocation(tmp_path: Path) -> None:
    waste_month_attributed(tmp_path)
    assert stored_advice(month=MONTH) is not None
    # 2.44 USD a month is under 25: no recommendation; 25.00 is not under it: one.
    assert _made() == {IDLE: Decimal("25.00")}


@pytest.mark.parametrize(
    ("floor", "expected"),
    [
        ("0", {CHECKPOINT, IDLE}),
        ("2.44", {CHECKPOINT, IDLE}),
        ("2.45", {IDLE}),
        ("25", {IDLE}),
        ("25.01", set()),
    ],
)
def test_a_saving_under_the_floor_is_no_recommendation(
    floor: str, expected: set[tuple[str, str, str]], tmp_path: Path
) -> None:
    waste_month_attributed(tmp_path)
    with override_settings(FINOPS_ADVICE_MIN_MONTHLY_SAVING=Decimal(floor)):
        made = _made()
    assert set(made) == expected
    if CHECKPOINT in made:
        assert made[CHECKPOINT] == Decimal("2.44")


def test_the_stored_recommendations_follow_the_floor_and_the_page_sums_them(
    tmp_path: Path, finance_client: Client
) -> None:
    waste_month_attributed(tmp_path)
    recommendations_refresh(month=MONTH)
    assert not Recommendation.objects.filter(billing_period=MONTH, kind="checkpoint").exists()
    assert Recommendation.objects.filter(billing_period=MONTH, kind="idle").exists()
    # The team page still shows the figure in its table, as an estimate, not as advice.
    page = finance_client.get("/teams/vision/", {"month": "2025-06"}).content.decode()
    table = page[page.index('data-testid="checkpoint-advice"') :]
    assert "2.44 USD" in table[: table.index("</table>")]
    # Another floor is another computation: the month's recommendations are made again.
    with override_settings(FINOPS_ADVICE_MIN_MONTHLY_SAVING=Decimal(0)):
        recommendations_current(month=MONTH)
    saving = Recommendation.objects.get(billing_period=MONTH, kind="checkpoint").monthly_savings
    assert saving == Decimal("2.44")
    # "Open recommendations save ... a month": the sum of the stored open ones, each currency,
    # each overlap once (docs/pricing.md, "One saving per cost"): speech's spot saving of
    # 129.73 on hpc overlaps its idle allocation there, 25.00 of 200.00 (an eighth), by
    # 129.73 / 8 = 16.22.
    recommendations_refresh(month=MONTH)
    opened = Recommendation.objects.filter(billing_period=MONTH, status="open")
    spot = opened.get(team__slug="speech", kind="spot")
    assert spot.assumptions["overlap_with"] == [
        {"kind": "idle", "key": "allocation:hpc", "amount": "16.22", "idle_share": "0.1250"}
    ]
    total = sum(r.monthly_savings for r in opened) - Decimal("16.22")
    page = finance_client.get("/pricing/", {"month": "2025-06"}).content.decode()
    said = re.search(r'data-testid="savings-total">Open recommendations save ([^<]*) a month', page)
    assert said is not None
    assert said.group(1) == f"{total:,.2f} USD"
    # The headline says it is an estimate and what the netting took off (h-pages: a total
    # under the rows' sum, unexplained, read as an error).
    sentence = page[page.index('data-testid="savings-total">') :]
    sentence = sentence[: sentence.index("</p>")]
    assert "a month: an estimate, each row priced with the assumptions under it" in sentence
    rows_sum = total + Decimal("16.22")
    assert f"counted once, 16.22 USD less than the open rows' {rows_sum:,.2f} USD." in sentence
