"""The run page's GPU-hours of a job are the exact sum of its ledger rows' GPU-seconds on both
databases. SQLite stores a decimal column as a float and its SQL SUM adds floats: three thousand
rows of about a GPU-day each sum a few microseconds short. The rows here add up to exactly
71,999.05 GPU-hours, which the page rounds half up to 71,999.1; the float sum, a hair under,
showed 71,999.0 (finops.core.money.exact_sum sums them as Decimals)."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.db import connection
from django.db.models import Sum
from django.test import Client
from django.urls import reverse

from finops.attribution.models import AllocatedCost
from finops.org.models import Team
from tests.gpu_seconds_scene import JOB_ID, MONTH, ROWS, RUN_ID, near_gpu_days, sweep_ledger

pytestmark = pytest.mark.django_db

# 71,999 GPU-hours and 180 GPU-seconds: exactly half way between two figures of one decimal.
TOTAL = Decimal(71_999 * 3600 + 180)


def _seconds() -> list[Decimal]:
    """ROWS values of six places, a GPU-day less a few microseconds each, the last one making
    the total exactly TOTAL."""
    seconds = near_gpu_days(ROWS - 1)
    return [*seconds, TOTAL - sum(seconds, Decimal(0))]


def _one_decimal(hours: Decimal) -> str:
    return f"{hours.quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):,.1f}"


def test_job_gpu_hours_summed_exactly(team: Team, finance_client: Client) -> None:
    seconds = _seconds()
    sweep_ledger(team, seconds)
    assert sum(seconds, Decimal(0)) == TOTAL
    exact = _one_decimal(TOTAL / 3600)
    assert exact == "71,999.1"
    if connection.vendor == "sqlite":
        # The case bites: SQL SUM over the same rows, grouped as the page groups them.
        (float_sum,) = (
            AllocatedCost.objects.filter(billing_period=MONTH, team=team, run_id=RUN_ID)
            .order_by()
            .values("job_id", "billing_currency")
            .annotate(s=Sum("gpu_seconds"))
            .values_list("s", flat=True)
        )
        assert float_sum < TOTAL
        assert _one_decimal(float_sum / 3600) == "71,999.0"

    url = reverse("web:run", args=[team.slug, RUN_ID])
    response = finance_client.get(url, {"month": "2025-09"})
    assert response.status_code == 200
    html = re.sub(r"\s+", " ", response.content.decode())
    # The jobs table's row of the job (its state follows its id there).
    (row,) = re.findall(rf"<td>{JOB_ID}</td> <td><span class=\"state.*?</tr>", html)
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    assert exact in cells, cells
