"""The GPU-seconds exactness scene, shared by tests/chargeback/test_statement_gpu_seconds.py (a
statement's sums) and tests/web/test_run_page_gpu_hours.py (the run page's job row): run
`sweep`'s one job with three thousand ledger rows of about a GPU-day each (86,399.999999
GPU-seconds less a few microseconds), whose sum SQLite's float SUM gets a few microseconds
short."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from billing_ingest.models import JobRecord
from finops.attribution.models import AllocatedCost, Category
from finops.org.models import Team
from tests.factories import JobRecordFactory

MONTH = dt.date(2025, 9, 1)
ROWS = 3000
RUN_ID = "sweep"
JOB_ID = "7001"


def near_gpu_days(count: int) -> list[Decimal]:
    """`count` values of six places: a GPU-day less a microsecond, less up to six more."""
    return [Decimal("86399.999999") - Decimal(i % 7) / 1_000_000 for i in range(count)]


def sweep_ledger(team: Team, seconds: list[Decimal]) -> JobRecord:
    """The run's job, and a training ledger row of 0.01 USD per value of `seconds`, spread over
    the month's days."""
    job = JobRecordFactory.create(run_id=RUN_ID, job_id=JOB_ID)
    AllocatedCost.objects.bulk_create(
        AllocatedCost(
            billing_period=MONTH, day=dt.date(2025, 9, 1 + i % 28), category=Category.TRAINING,
            team=team, provider_name="AWS", billing_account_id="111111111111",
            service_name="Amazon Elastic Compute Cloud", billing_currency="USD",
            amount=Decimal("0.01"), gpu_seconds=s, job=job, run_id=RUN_ID,
        )
        for i, s in enumerate(seconds)
    )  # fmt: skip
    return job
