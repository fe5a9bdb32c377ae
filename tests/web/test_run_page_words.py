"""The run page's headline figures as a finance person reads them (h-pages, from the demo's
screenshots): each money figure names its currency, and the cost of the failed attempts says
that it counts cancelled ones too (the demo's 6,101.92 "failed" beside "waste 0.00" was one
CANCELLED attempt). On fixtures/scenarios/focus-slurm-waste (June 2025)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from tests.scenario_setup import waste_month_attributed

pytestmark = pytest.mark.django_db


def test_the_headline_figures_name_their_currency(tmp_path: Path, finance_client: Client) -> None:
    waste_month_attributed(tmp_path)
    page = finance_client.get("/runs/vision/pretrain/", {"month": "2025-06"}).content.decode()
    head = page[: page.index("</div>\n</div>", page.index('class="kpis"'))]
    assert '<span class="label">Per GPU-hour (USD)</span>' in head
    assert ">Failed or cancelled attempts (USD)</span>" in head
    assert '<span class="label">Jobs / failed or cancelled</span>' in head
