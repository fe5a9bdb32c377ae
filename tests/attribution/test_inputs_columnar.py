"""Attribution reads its inputs cheaply (issue 34): on PostgreSQL the line items' and jobs' rows
as psycopg hands them out, without the ORM's per-cell converters, JSON decoded once per
distinct text, and what a line takes from its billed resource resolved once per resource.
The rows must be the ORM's to the last digit, and the engine lines what each row says."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution import engine
from finops.attribution.inputs.jobs import _JOB_FIELDS, job_rows, jobs_queryset, values_with_epochs
from finops.attribution.inputs.month import inputs_load, line_rows, lines_queryset
from finops.org.models import MappingRule, Team

MONTH = dt.date(2025, 3, 1)
START = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def _line(batch: ImportBatch, hour: int, **fields: Any) -> CostLineItem:
    values: dict[str, Any] = {
        "batch": batch, "source": "s", "billing_period": MONTH, "billing_period_start": START,
        "provider_name": "AWS", "billing_account_id": "111", "billing_currency": "USD",
        "charge_period_start": START + hour * HOUR, "charge_period_end": START + (hour + 1) * HOUR,
        "billed_cost": Decimal("10.00"), "effective_cost": Decimal("10.00"),
        "charge_category": "Usage", "service_category": "Storage", "resource_id": "vol-1",
    }  # fmt: skip
    values.update(fields)
    return CostLineItem(**values)


@pytest.fixture
def month_rows() -> None:
    """A volume billed three hours (ListCost 12.00 twice, then 0: not listed), its tag naming
    team ml then team cv; a node line with a contracted cost and a quantity; two jobs, one
    running, one on a third of a GPU whose label `team=cv` a rule maps to team vision."""
    vision = Team.objects.create(slug="vision", name="Vision")
    MappingRule.objects.create(kind="label", key="team", value="cv", team=vision)
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="s", file_name="f", status="succeeded"
    )
    jobs = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    CostLineItem.objects.bulk_create([
        _line(billing, 0, list_cost=Decimal("12.00"), tags={"team": "ml"}),
        _line(billing, 1, list_cost=Decimal("12.00"), tags={"team": "ml"}),
        _line(billing, 2, list_cost=Decimal("0"), tags={"team": "cv"}),
        _line(
            billing, 0, resource_id="i-n0", resource_name="n0", service_category="Compute",
            effective_cost=Decimal("98.3200000001"), list_cost=Decimal("120.50"),
            contracted_cost=Decimal("98.32"), consumed_quantity=Decimal("1.000000"),
            consumed_unit="Hours", x_gpu_count=8,
        ),
    ])  # fmt: skip
    JobRecord.objects.bulk_create([
        JobRecord(
            batch=jobs, cluster="c", job_id="1", account="acct", state="COMPLETED",
            start=START + dt.timedelta(seconds=90, microseconds=250), end=START + 2 * HOUR,
            gpus=Decimal("8"), nodes=["n0"], run_id="r1",
        ),
        JobRecord(
            batch=jobs, cluster="c", job_id="2", account="", namespace="ns", state="RUNNING",
            start=START, end=None, gpus=Decimal("0.333333"), gpu_numerator=1, gpu_denominator=3,
            nodes=["n0"], labels={"team": "cv", "app": "x"}, endpoint="",
        ),
    ])  # fmt: skip


def _decoded(row: tuple[Any, ...], *json_at: int) -> tuple[Any, ...]:
    return tuple(json.loads(v) if i in json_at and v is not None else v for i, v in enumerate(row))


@pytest.mark.django_db
def test_line_rows_are_the_orms_values(month_rows: None) -> None:
    queryset = lines_queryset(MONTH, epochs=True)
    raw = list(line_rows(queryset))
    orm = list(queryset)
    assert len(raw) == len(orm) == 4
    # Tags come as the database's JSON text (column 8); every other value is the ORM's, to
    # the digit and the scale (repr tells Decimal("98.32") from Decimal("98.3200000000")).
    assert [repr(_decoded(row, 8)) for row in raw] == [repr(row) for row in orm]


@pytest.mark.django_db
def test_job_rows_are_the_orms_values(month_rows: None) -> None:
    jobs = jobs_queryset(START, START + 3 * HOUR).order_by("id")
    queryset = values_with_epochs(jobs, _JOB_FIELDS, ("start", "end"))
    raw = list(job_rows(queryset))
    orm = list(queryset)
    assert len(raw) == len(orm) == 2
    # Node lists (column 9) and labels (14) as JSON text.
    assert [repr(_decoded(row, 9, 14)) for row in raw] == [repr(row) for row in orm]


@pytest.mark.django_db
def test_each_line_keeps_its_own_amounts_and_owner(month_rows: None) -> None:
    inputs, read = inputs_load(month=MONTH)
    assert read == 4
    volume = [line for line in inputs.lines if line.node is None]
    ml, cv = Team.objects.get(slug="ml").id, Team.objects.get(slug="cv").id
    # One resource, three hours: the tag's team per hour; the on-demand equivalent is the
    # ListCost while listed, then the EffectiveCost (a usage line listed at 0).
    assert [(line.team_id, line.category) for line in volume] == [
        (ml, engine.TAGGED), (ml, engine.TAGGED), (cv, engine.TAGGED),
    ]  # fmt: skip
    assert [line.list_cost for line in volume] == [Decimal("12.00")] * 2 + [Decimal("10.00")]
    # The unlisted hour's dims say where its figure came from (`unpriced`), the listed `bill`.
    assert [inputs.dims[line.group][8] for line in volume] == ["bill", "bill", "unpriced"]
    assert volume[0].group == volume[1].group != volume[2].group
    assert {line.id: line.group for line in inputs.lines} == inputs.line_dims
    (node,) = [line for line in inputs.lines if line.node is not None]
    assert (node.node, node.gpus, node.cost, node.list_cost, node.contracted_cost) == (
        "n0",
        8,
        Decimal("98.3200000001"),
        Decimal("120.50"),
        Decimal("98.32"),
    )
    assert (node.start, node.end) == (int(START.timestamp()), int((START + HOUR).timestamp()))
    jobs = {job.id: job for job in inputs.jobs}
    first, second = sorted(jobs)
    # Whole seconds of the start (the microseconds are kept in the job's meta).
    assert jobs[first].start == int(START.timestamp()) + 90
    assert inputs.job_meta[first].start == START + dt.timedelta(seconds=90, microseconds=250)
    assert (jobs[second].gpu_micros, jobs[second].gpu_denominator) == (1_000_000, 3)
    assert jobs[second].end is None
    assert jobs[second].team_id == Team.objects.get(slug="vision").id  # by its label
