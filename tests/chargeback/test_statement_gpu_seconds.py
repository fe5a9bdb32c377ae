"""A statement's GPU-seconds are the exact sum of its ledger rows on both databases: SQLite
stores a decimal column as a float and its SUM adds floats, so a run's three thousand ledger
rows of about 86,399.999999 GPU-seconds (a GPU-day less a microsecond) summed there lose digits
(259,199,999.99698 instead of 259,199,999.997); the statement sums them exactly, as it does the
money (finops.core.money.MoneySum)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from finops.attribution.models import AllocatedCost, Category
from finops.chargeback.selectors import statement_get
from finops.org.models import Team
from tests.factories import JobRecordFactory

pytestmark = pytest.mark.django_db

MONTH = dt.date(2025, 9, 1)
ROWS = 3000


def test_gpu_seconds_summed_exactly(team: Team) -> None:
    job = JobRecordFactory.create(run_id="sweep")
    seconds = [Decimal("86399.999999") - Decimal(i % 7) / 1_000_000 for i in range(ROWS)]
    AllocatedCost.objects.bulk_create(
        AllocatedCost(
            billing_period=MONTH, day=dt.date(2025, 9, 1 + i % 28), category=Category.TRAINING,
            team=team, provider_name="AWS", billing_account_id="111111111111",
            service_name="Amazon Elastic Compute Cloud", billing_currency="USD",
            amount=Decimal("0.01"), gpu_seconds=s, job=job, run_id="sweep",
        )
        for i, s in enumerate(seconds)
    )  # fmt: skip
    exact = sum(seconds, Decimal(0))
    as_floats = sum(float(s) for s in seconds)
    assert Decimal(repr(as_floats)).quantize(Decimal("0.000001")) != exact  # the case bites

    statement = statement_get(team=team, month=MONTH)
    (training,) = statement.categories
    assert training.gpu_seconds == exact
    (run,) = statement.runs
    assert run.gpu_seconds == exact
