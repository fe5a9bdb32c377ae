"""The month of fixtures/explorer/ (see its README), loaded through the real commands: a
pytest fixture the explorer's API, page and browser tests share."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from finops.currency.models import FxRate
from finops.org.models import Team

FOLDER = Path(__file__).resolve().parent.parent / "fixtures" / "explorer"


@pytest.fixture
def explorer_month(team: Team, other_team: Team) -> Any:
    """Teams vision and speech, EUR->USD 1.1 from 1 Sep 2025, the bill imported and
    September 2025 attributed."""
    FxRate.objects.create(
        date=dt.date(2025, 9, 1), from_currency="EUR", to_currency="USD", rate=Decimal("1.1")
    )
    out = io.StringIO()
    call_command(
        "ingest_billing", "--format", "focus", str(FOLDER / "focus-2025-09.csv"),
        "--source", "explorer", stdout=out,
    )  # fmt: skip
    call_command("attribute", "--month", "2025-09", stdout=out)
    return FOLDER
