"""PostgreSQL: a settled import batch (billing, jobs, utilisation, energy, run metrics) leaves
planner statistics on the tables it filled (billing_ingest.loading.statistics), so the pipeline
that reads them seconds later does not plan on guesses: a table never analysed, or grown by more
than a tenth since it last was, is analysed; one that barely changed is not (ANALYZE once per
batch, only where it tells)."""

from __future__ import annotations

import datetime as dt
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from billing_ingest.loading.partitions import batch_table
from billing_ingest.loading.statistics import tables_analyze_if_changed
from billing_ingest.models import ImportBatch, JobGpuUtilisation, JobRecord
from billing_ingest.services.batches import import_batch_create
from billing_ingest.services.billing import BillingFile, billing_batch_create, billing_batch_ingest
from billing_ingest.services.jobs import jobs_batch_ingest
from billing_ingest.services.utilisation import utilisation_import
from finops.energy.models import JobEnergy
from finops.energy.services import energy_import
from finops.run_metrics.models import RunMetricPoint, TrainingRun
from tests.builders import FIRST_DUMP, focus_row, write_focus_csv
from tests.energy_inputs import ENERGY, QUIET

pytestmark = pytest.mark.django_db

SCRATCH = "statistics_scratch"


@pytest.fixture(autouse=True)
def _postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("planner statistics are PostgreSQL's (SQLite plans without them)")


def _planned_rows(table: str) -> float:
    """pg_class.reltuples: what the planner believes the table holds (-1: never analysed)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [f'"{table}"'])
        (tuples,) = cursor.fetchone()
    return float(tuples)


def _has_statistics(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_stats WHERE tablename = %s)", [table])
        (found,) = cursor.fetchone()
    return bool(found)


def _truncate(*tables: str) -> None:
    """Empty tables without statistics, as a new installation's (rolled back after)."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f'TRUNCATE "{table}" CASCADE')


def _fill(rows: int, start: int = 0) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {SCRATCH} SELECT g, repeat('x', 200) FROM generate_series(%s, %s) g",
            [start, start + rows - 1],
        )


def test_never_analysed_or_grown_tables_are_analysed_and_no_others() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {SCRATCH} (id integer, pad text)")
    _fill(1000)
    assert _planned_rows(SCRATCH) == -1
    assert not _has_statistics(SCRATCH)
    assert tables_analyze_if_changed([SCRATCH]) == [SCRATCH]
    assert _planned_rows(SCRATCH) == 1000
    assert _has_statistics(SCRATCH)
    assert tables_analyze_if_changed([SCRATCH]) == []  # unchanged
    _fill(50, start=1000)  # 5 % more pages: not worth an ANALYZE
    assert tables_analyze_if_changed([SCRATCH]) == []
    assert _planned_rows(SCRATCH) == 1000
    _fill(200, start=1050)  # 25 % since the last ANALYZE, the 5 % included
    assert tables_analyze_if_changed([SCRATCH]) == [SCRATCH]
    assert _planned_rows(SCRATCH) == 1250


def test_a_settled_jobs_batch_analyses_the_job_table(tmp_path: Path) -> None:
    table = JobRecord._meta.db_table
    _truncate(table)
    assert _planned_rows(table) == -1
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join(FIRST_DUMP) + "\n")
    batch = import_batch_create(kind="jobs", format="slurm", source="hpc1", path=path)
    result = jobs_batch_ingest(batch_id=batch.pk)
    assert result.status == ImportBatch.Status.SUCCEEDED
    assert _planned_rows(table) == JobRecord.objects.count() == 4


def test_a_utilisation_import_analyses_its_table(tmp_path: Path) -> None:
    table = JobGpuUtilisation._meta.db_table
    _truncate(table)
    path = tmp_path / "utilisation.csv"
    path.write_text("job_id,utilisation\n" + "".join(f"j{i},0.5\n" for i in range(40)))
    assert utilisation_import(path=path, cluster="k8s").rows == 40
    assert _planned_rows(table) == 40
    assert _has_statistics(table)


def test_a_settled_billing_batch_analyses_its_partitions(tmp_path: Path) -> None:
    month = dt.date(2024, 9, 1)
    rows = [
        focus_row(
            BillingPeriodStart="2024-09-01T00:00:00Z", BillingPeriodEnd="",
            ChargePeriodStart=f"2024-09-{day:02d}T10:00:00Z",
            ChargePeriodEnd=f"2024-09-{day:02d}T11:00:00Z",
            ResourceId=f"r{day}", ListCost="2", BilledCost="2", EffectiveCost="2",
        )
        for day in range(1, 31)
    ]  # fmt: skip
    path = tmp_path / "focus.csv"
    write_focus_csv(path, rows)
    batch = billing_batch_create(
        format="focus", source="acme", files=[BillingFile(path=path, label=path.name)]
    )
    result = billing_batch_ingest(batch_id=batch.pk)
    assert result.status == ImportBatch.Status.SUCCEEDED
    partition = batch_table(month, batch.pk)
    assert _planned_rows(partition) == 30  # counted when its indexes were built...
    assert _has_statistics(partition)  # ...but only ANALYZE gives the columns' statistics


def test_an_energy_import_analyses_its_table() -> None:
    table = JobEnergy._meta.db_table
    _truncate(table)
    assert _planned_rows(table) == -1
    call_command(
        "ingest_jobs", "--format", "slurm", str(ENERGY / "sacct-D-hpc.txt"), "--cluster", "hpc",
        "--no-attribute", **QUIET,
    )  # fmt: skip
    done = energy_import(path=ENERGY / "dcgm-energy-hpc.json", cluster="hpc")
    assert done.rows > 0
    assert _planned_rows(table) == JobEnergy.objects.count() == done.rows
    assert _has_statistics(table)


def test_a_settled_run_metrics_batch_analyses_its_tables(tmp_path: Path) -> None:
    points, runs = RunMetricPoint._meta.db_table, TrainingRun._meta.db_table
    _truncate(points, runs)
    path = tmp_path / "metrics.csv"
    path.write_text(
        "run_id,team,timestamp,step,tokens\n"
        + "".join(f"pretrain,vision,2025-06-03T10:{i:02d}:00Z,{i},{100 * i}\n" for i in range(30))
    )
    call_command("ingest_run_metrics", "--format", "csv", str(path), stdout=StringIO())
    assert _planned_rows(points) == RunMetricPoint.objects.count() == 30
    assert _planned_rows(runs) == TrainingRun.objects.count() == 1
    assert _has_statistics(points)
