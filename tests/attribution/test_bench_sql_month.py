"""The benchmark's server-side month generator (bench/month_sql.py) still builds a month that
attribution takes: it writes raw SQL into the job and line item tables, so a new NOT NULL column
without a database default breaks it silently (the bench is not part of the suite otherwise;
JobRecord.service did, session 17)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.db import connection

from billing_ingest.models import CostLineItem, JobRecord
from finops.attribution.models import AttributionRun
from finops.attribution.services import attribution_month_run

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.django_db
def test_sql_month_is_built_and_attributed() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the bench's SQL generator is PostgreSQL's")
    sys.path.insert(0, str(BENCH))
    try:
        from attribution_month import MONTH  # type: ignore[import-not-found]
        from month_sql import build_month_sql  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    build_month_sql(3, 40, 7)
    assert CostLineItem.objects.filter(billing_period=MONTH).count() >= 3 * 744
    assert JobRecord.objects.count() == 40
    run = attribution_month_run(month=MONTH)
    assert run.status == AttributionRun.Status.SUCCEEDED
    assert run.jobs > 0
