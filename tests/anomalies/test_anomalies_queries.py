"""Detection reads the ledger summed by the database: its queries do not grow with the ledger.

anomalies_detect reads a handful of grouped queries for the whole span (the teams' series and
sources, endpoint owners, GPU nodes, the nodes' clusters), then the cells of each event found
and its team's rows. So ten times the runs and jobs of another team cost not one query more
and not one row more read from the ledger.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.test.utils import CaptureQueriesContext

from billing_ingest.models import ImportBatch, JobRecord
from finops.anomalies.models import Anomaly
from finops.anomalies.services import anomalies_detect
from finops.attribution.models import AllocatedCost, Category
from finops.org.models import Team
from tests import anomaly_ledger as ledger

pytestmark = pytest.mark.django_db

SINCE = ledger.START + dt.timedelta(days=20)


def _jobs(count: int, nodes: int) -> list[JobRecord]:
    batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="hpc", file_name="j", status="succeeded"
    )
    start = dt.datetime.combine(ledger.START, dt.time(), dt.UTC)
    return JobRecord.objects.bulk_create(
        JobRecord(
            batch=batch, cluster="hpc", job_id=str(i), account="a", state="COMPLETED",
            start=start, end=start + dt.timedelta(days=ledger.DAYS), gpus=1,
            nodes=[f"n{i % nodes}"], run_id=f"run-{i}",
        )
        for i in range(count)
    )  # fmt: skip


def _steady_runs(team: Team, jobs: list[JobRecord]) -> None:
    """A steady day of each job's run on its node, and the node's idle: nothing to find."""
    rows = []
    for i in range(ledger.DAYS):
        day = ledger.START + dt.timedelta(days=i)
        common = {"billing_period": day.replace(day=1), "day": day, "provider_name": "AWS",
                  "service_name": "Amazon EC2", "billing_currency": "USD"}  # fmt: skip
        for job in jobs:
            node = job.nodes[0]
            rows.append(
                AllocatedCost(
                    category=Category.TRAINING,
                    team=team,
                    job=job,
                    run_id=job.run_id,
                    node=node,
                    amount=Decimal(10),
                    **common,
                )
            )
        for node in {job.nodes[0] for job in jobs}:
            rows.append(AllocatedCost(category=Category.IDLE, node=node, amount=Decimal(3),
                                      **common))  # fmt: skip
    AllocatedCost.objects.bulk_create(rows)


@contextmanager
def _ledger_reads() -> Iterator[dict[str, int]]:
    """Counts the queries of the ledger and the rows they hand to Python."""
    counts = {"queries": 0, "rows": 0}

    def mark(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        ledger_sql = '"attribution_allocatedcost"' in sql
        counts["queries"] += ledger_sql
        context["cursor"].reads_ledger = ledger_sql
        return execute(sql, params, many, context)

    def counting(name: str) -> Any:
        def fetch(self: CursorWrapper, *args: Any) -> Any:
            rows = getattr(self.cursor, name)(*args)
            if getattr(self, "reads_ledger", False):
                counts["rows"] += len(rows) if name != "fetchone" else rows is not None
            return rows

        return fetch

    with pytest.MonkeyPatch.context() as patch, connection.execute_wrapper(mark):
        for name in ("fetchone", "fetchmany", "fetchall"):
            patch.setattr(CursorWrapper, name, counting(name), raising=False)
        yield counts


def _detect() -> tuple[int, dict[str, int]]:
    with CaptureQueriesContext(connection) as queries, _ledger_reads() as ledger_reads:
        anomalies_detect(since=SINCE)
    return len(queries.captured_queries), ledger_reads


def test_the_ledger_read_does_not_grow_with_runs_and_jobs(team: Team, other_team: Team) -> None:
    ledger.build(team)
    jobs = _jobs(60, nodes=6)
    _steady_runs(other_team, jobs[:6])
    anomalies_detect(since=SINCE)  # stores the spike: the runs below only compare it
    small = _detect()
    [spike] = Anomaly.objects.all()
    assert spike.drivers.exists()
    assert small[1]["rows"] > 0
    _steady_runs(other_team, jobs[6:])  # ten times the runs and jobs on the same nodes
    assert AllocatedCost.objects.filter(team=other_team).count() == 60 * ledger.DAYS
    # The same queries and the same rows: sums per team, day, node, never per run or job.
    assert _detect() == small
    assert list(Anomaly.objects.all()) == [spike]


def test_no_query_reads_the_ledger_row_by_row(team: Team, other_team: Team) -> None:
    ledger.build(team)
    _steady_runs(other_team, _jobs(10, nodes=2))
    with CaptureQueriesContext(connection) as queries:
        anomalies_detect(since=SINCE)
    ledger_sql = [
        q["sql"] for q in queries.captured_queries if '"attribution_allocatedcost"' in q["sql"]
    ]
    assert ledger_sql
    # Every read of the ledger is an aggregate (SUM, MAX) or a DISTINCT: never its rows.
    assert all(
        "SUM(" in sql or "MAX(" in sql or "FINOPS_DECIMAL_SUM(" in sql or "DISTINCT" in sql
        for sql in ledger_sql
    ), ledger_sql
