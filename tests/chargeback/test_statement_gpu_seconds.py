"""A statement's GPU-seconds are the exact sum of its ledger rows on both databases: SQLite
stores a decimal column as a float and its SUM adds floats, so a run's three thousand ledger
rows of about 86,399.999999 GPU-seconds (a GPU-day less a microsecond) summed there lose digits
(259,199,999.99698 instead of 259,199,999.997); the statement sums them exactly, as it does the
money (finops.core.money.MoneySum)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from finops.chargeback.selectors import statement_get
from finops.org.models import Team
from tests.gpu_seconds_scene import MONTH, ROWS, near_gpu_days, sweep_ledger

pytestmark = pytest.mark.django_db


def test_gpu_seconds_summed_exactly(team: Team) -> None:
    seconds = near_gpu_days(ROWS)
    sweep_ledger(team, seconds)
    exact = sum(seconds, Decimal(0))
    as_floats = sum(float(s) for s in seconds)
    assert Decimal(repr(as_floats)).quantize(Decimal("0.000001")) != exact  # the case bites

    statement = statement_get(team=team, month=MONTH)
    (training,) = statement.categories
    assert training.gpu_seconds == exact
    (run,) = statement.runs
    assert run.gpu_seconds == exact
