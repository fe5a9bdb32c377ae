"""A month attributed in parts (a chord of part tasks, then one reduce) writes the same ledger
and rollups as the month attributed in one process, to the last stored decimal."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from billing_ingest.models import CostLineItem, ImportBatch, JobRecord
from finops.attribution.inputs.jobs import job_node_names, jobs_load
from finops.attribution.inputs.month import Inputs, MonthScope, inputs_load, month_scope_load
from finops.attribution.inputs.team_mapping import TeamResolver
from finops.attribution.models import AllocatedCost, AttributionRun
from finops.attribution.services import (
    attribution_month_plan,
    attribution_month_run,
    attribution_month_run_split,
)
from tests.split_months import (
    ACCOUNTS,
    HORIZON,
    MONTH,
    NODES,
    JobSpec,
    LineSpec,
    at,
    jobs,
    month_build,
    scenario_build,
    snapshot,
)


def _split_equals_whole(parts: int) -> int:
    """Attribute the month whole, then in parts; the same rows. Returns the parts planned."""
    whole_run = attribution_month_run(month=MONTH)
    whole = snapshot()
    plan = attribution_month_plan(month=MONTH, parts=parts)
    attribution_month_run_split(month=MONTH, parts=parts)
    assert snapshot() == whole
    run = AttributionRun.objects.order_by("-id").first()
    assert run is not None
    assert run.status == AttributionRun.Status.SUCCEEDED
    assert run.line_items == CostLineItem.objects.count()
    assert run.jobs == whole_run.jobs  # the month's jobs, though each part loads only its own
    return len(plan)


hours = st.integers(min_value=0, max_value=HORIZON // 3600 - 1)


@st.composite
def line_items(draw: st.DrawFn) -> LineSpec:
    kind = draw(st.sampled_from(["node", "node", "node", "tagged", "support"]))
    if kind == "node":
        start = draw(hours) * 3600
        end = start + draw(st.sampled_from([3600, 3600, 7200, 86400]))
        resource = draw(st.sampled_from(NODES))
    else:
        start = draw(st.integers(0, 2)) * 86400
        end = start + 86400
        resource = draw(st.sampled_from(["vol-a", "vol-b", "s3"]))
    cost = Decimal(draw(st.integers(min_value=-(10**14), max_value=10**16))).scaleb(-12)
    listed = cost + Decimal(draw(st.integers(0, 10**12))).scaleb(-12)
    return start, end, cost, listed, resource, kind, draw(st.sampled_from(ACCOUNTS))


@pytest.mark.django_db
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    job_specs=st.lists(jobs(), max_size=10),
    line_specs=st.lists(line_items(), min_size=1, max_size=16),
    spread_nodes=st.lists(st.sampled_from(NODES), max_size=3, unique=True),
    rule=st.sampled_from([None, "even", "gpu_spend", "fixed"]),
    parts=st.integers(min_value=2, max_value=4),
)
def test_a_month_split_in_parts_writes_the_same_ledger(
    job_specs: list[JobSpec],
    line_specs: list[LineSpec],
    spread_nodes: list[str],
    rule: str | None,
    parts: int,
) -> None:
    month_build(job_specs, line_specs, spread_nodes, rule)
    event(f"parts planned: {_split_equals_whole(parts)}")
    spread = AllocatedCost.objects.filter(category="idle", job__isnull=False).exists()
    event(f"spread idle: {spread}")
    event(f"shared: {AllocatedCost.objects.filter(category='shared').exists()}")


@pytest.mark.django_db
@pytest.mark.parametrize("parts", [2, 3, 5, 50])
def test_a_scenario_split_in_parts_writes_the_same_ledger(parts: int) -> None:
    scenario_build()
    assert len(attribution_month_plan(month=MONTH, parts=parts)) == min(parts, 7)  # 7 resources
    _split_equals_whole(parts)
    assert AllocatedCost.objects.filter(category="idle", job_id__isnull=False).exists()  # spread
    assert AllocatedCost.objects.filter(category="shared").exists()


@pytest.mark.django_db
def test_a_month_with_unused_commitments_is_one_part() -> None:
    """Which pool an unused commitment's idle goes to depends on every node line of the month."""
    scenario_build()
    line = CostLineItem.objects.first()
    assert line is not None
    CostLineItem.objects.create(
        batch=line.batch, source="s", billing_period=MONTH, billing_period_start=at(0),
        provider_name="AWS", billing_account_id="111", billing_currency="USD",
        charge_period_start=at(0), charge_period_end=at(3600), billed_cost=Decimal(5),
        effective_cost=Decimal(5), commitment_discount_status="Unused", resource_id="ri-1",
    )  # fmt: skip
    assert len(attribution_month_plan(month=MONTH, parts=4)) == 1
    _split_equals_whole(4)


@pytest.fixture
def worker_queue_groups() -> dict[str, str]:
    """Two workers on the attribution queue, so the parts really run in two processes."""
    return {"ingest": "ingest", "compute": "attribution,notifications", "parts": "attribution"}


@pytest.mark.worker
def test_the_chord_on_real_workers_writes_the_same_ledger(celery_worker_process: Path) -> None:
    from finops.attribution.month_step import attribution_month_split

    scenario_build()
    attribution_month_run(month=MONTH)
    whole = snapshot()
    summary = attribution_month_split(MONTH, 3).get(timeout=120)
    assert summary["status"] == AttributionRun.Status.SUCCEEDED
    assert snapshot() == whole
    log = celery_worker_process.read_text()
    assert log.count("attribution_month_part") >= 3
    assert "attribution_month_reduce" in log


@pytest.mark.django_db
def test_a_part_loads_only_the_jobs_that_ran_on_its_nodes() -> None:
    scenario_build()
    whole, _ = inputs_load(month=MONTH)
    plan = attribution_month_plan(month=MONTH, parts=5)
    assert len(plan) == 5
    loaded: set[int] = set()
    for part in plan:
        inputs, _ = inputs_load(month=MONTH, part=part)
        nodes = {line.node for line in inputs.lines if line.node is not None}
        assert all(nodes.intersection(job.nodes) for job in inputs.jobs)
        assert inputs.month_jobs == len(whole.jobs)
        loaded |= {job.id for job in inputs.jobs}
    billed = {line.node for line in whole.lines if line.node is not None}
    assert loaded == {job.id for job in whole.jobs if billed.intersection(job.nodes)}
    assert any(len(inputs_load(month=MONTH, part=p)[0].jobs) < len(whole.jobs) for p in plan)


@pytest.mark.django_db
def test_parts_given_the_months_scope_read_it_no_more_and_load_the_same() -> None:
    """The plan reads the month's charge bounds and job node names once (MonthScope) and hands
    them to every part: a part given them asks the database for neither, and loads what a part
    that reads them itself loads. The scope survives its trip through a task's arguments."""
    scenario_build()
    plan = attribution_month_plan(month=MONTH, parts=3)
    scope = month_scope_load(month=MONTH)
    assert scope is not None
    assert MonthScope.from_state(json.loads(json.dumps(scope.state()))) == scope
    for part in plan:
        alone, _ = inputs_load(month=MONTH, part=part)
        with CaptureQueriesContext(connection) as queries:
            given, _ = inputs_load(month=MONTH, part=part, scope=scope)
        sql = " ".join(q["sql"] for q in queries.captured_queries)
        assert "MIN(" not in sql  # the charge bounds
        assert "COUNT(" not in sql  # the jobs grouped by node list
        assert (given.lines, given.jobs, given.month_jobs) == (
            alone.lines, alone.jobs, alone.month_jobs,
        )  # fmt: skip


@pytest.mark.django_db
def test_a_part_finds_its_jobs_whatever_shape_their_node_list_has() -> None:
    """The database's pre-filter of a part's jobs (on PostgreSQL `= ANY` over the node list's
    elements) keeps the jobs the Python check keeps: a list holding one of the part's nodes,
    and not an object or a bare string naming it. job_node_names counts every job once though
    it reads each distinct node list once."""
    batch = ImportBatch.objects.create(
        kind="jobs", format="slurm", source="c", file_name="j", status="succeeded"
    )
    shapes: list[object] = [["n1"], ["n0", "n1"], ["n1"], ["n2"], {"n1": 1}, "n1", [], ["N1"]]
    created = JobRecord.objects.bulk_create(
        JobRecord(
            batch=batch, cluster="c", job_id=str(i), start=at(0), end=at(3600), gpus=1,
            nodes=nodes,
        )
        for i, nodes in enumerate(shapes)
    )  # fmt: skip
    bounds = (at(0), at(HORIZON))
    staged = jobs_load(Inputs(), TeamResolver.from_db(), *bounds, nodes={"n1", "n3"})
    assert sorted(job[0] for job in staged) == [created[i].pk for i in (0, 1, 2)]
    names, count = job_node_names(*bounds)
    assert (names, count) == ({"n0", "n1", "n2", "N1"}, len(shapes))
