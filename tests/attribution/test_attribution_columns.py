"""The month's GPU node lines read as columns (inputs/line_columns.py: binary COPY, PostgreSQL)
write the same ledger and rollups as the same lines read as rows, to the last stored decimal:
on drawn months with node lines of one hour and of several, tagged node lines (budget rollups),
amounts too large for the columns, lines without ListCost, shared and tagged lines, spread
pools, jobs naming a node twice; the same as the per-row engine's (jobs as Job values, not the
vectorised engine's JobBlock); and when two resources' digests collide, the month is read as
rows."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from unittest import mock

import numpy as np
import pytest
from django.db import connection
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing_ingest.models import CostLineItem, ImportBatch
from finops.attribution.inputs import line_columns
from finops.attribution.inputs.month import inputs_load
from finops.attribution.services import attribution_month_run
from tests.split_months import (
    ACCOUNTS,
    HORIZON,
    MONTH,
    NODES,
    JobSpec,
    at,
    jobs,
    month_build,
    scenario_build,
    snapshot,
)

Snapshot = dict[str, list[tuple[Any, ...]]]


def _postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the column read is PostgreSQL's (binary COPY)")


def _rows_then_columns() -> tuple[Snapshot, Snapshot]:
    with override_settings(FINOPS_ATTRIBUTION_COLUMNS=False):
        rows_run = attribution_month_run(month=MONTH)
        rows = snapshot()
    columns_run = attribution_month_run(month=MONTH)
    assert (columns_run.line_items, columns_run.jobs) == (rows_run.line_items, rows_run.jobs)
    return snapshot(), rows


# (start, end, cost, ListCost or None, node or resource, tags)
Extra = tuple[int, int, Decimal, Decimal | None, str, dict[str, str]]


def _extra_lines(extras: list[Extra]) -> None:
    batch = ImportBatch.objects.filter(kind="billing").first()
    assert batch is not None
    CostLineItem.objects.bulk_create(
        CostLineItem(
            batch=batch, source="s", billing_period=MONTH, billing_period_start=at(0),
            provider_name="AWS", billing_account_id=ACCOUNTS[0], billing_currency="USD",
            charge_period_start=at(start), charge_period_end=at(end), billed_cost=cost,
            effective_cost=cost, list_cost=listed, resource_id=f"i-{node}", resource_name=node,
            service_category="Compute", x_instance_type="p5.48xlarge", tags=tags,
        )
        for start, end, cost, listed, node, tags in extras
    )  # fmt: skip


@st.composite
def node_lines(draw: st.DrawFn) -> Extra:
    start = draw(st.integers(0, HORIZON // 3600 - 1)) * 3600
    end = start + draw(st.sampled_from([3600, 3600, 3600, 7200]))
    units = draw(
        st.one_of(
            st.integers(-(10**14), 10**16),
            st.integers(2 * 10**18, 3 * 10**18),  # past the columns' amounts: read as rows
        )
    )
    cost = Decimal(units).scaleb(-12)
    listed = draw(st.one_of(st.none(), st.just(cost), st.just(cost + Decimal("1.000000000001"))))
    tags = draw(st.sampled_from([{}, {}, {"team": "ml"}, {"kubernetes.io/hostname": "x"}]))
    return start, end, cost, listed, draw(st.sampled_from(NODES)), tags


@pytest.mark.django_db
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    job_specs=st.lists(jobs(), max_size=10),
    extras=st.lists(node_lines(), min_size=1, max_size=20),
    support=st.booleans(),
    spread_nodes=st.lists(st.sampled_from(NODES), max_size=3, unique=True),
    rule=st.sampled_from([None, "even", "gpu_spend"]),
    repeat_node=st.booleans(),
)
def test_columns_write_the_ledger_the_rows_write(
    job_specs: list[JobSpec],
    extras: list[Extra],
    support: bool,
    spread_nodes: list[str],
    rule: str | None,
    repeat_node: bool,
) -> None:
    _postgres()
    if repeat_node:
        # A job on the first extra line's bucket whose node list names its node twice and
        # another: it ran there once (JobIndex; the JobBlock's node count).
        start, _, _, _, node, _ = extras[0]
        other = NODES[(NODES.index(node) + 1) % len(NODES)]
        job_specs = [*job_specs, (start, start + 3600, Decimal(1), [node, other, node])]
    line_specs = []
    if support:
        line_specs.append((0, 86400, Decimal("333.333333333333"), Decimal("333.333333333333"),
                           "s3", "support", "111"))  # fmt: skip
        line_specs.append((0, 86400, Decimal("12.5"), Decimal("12.5"), "vol-a", "tagged", "222"))
    month_build(job_specs, line_specs, spread_nodes, rule)
    _extra_lines(extras)
    columns, rows = _rows_then_columns()
    assert columns == rows
    # The jobs as columns (the vectorised engine's JobBlock) against the jobs as Job values
    # one by one (the per-row engine, lines as rows too).
    with override_settings(FINOPS_ATTRIBUTION_COLUMNS=False, FINOPS_ATTRIBUTION_ENGINE="python"):
        attribution_month_run(month=MONTH)
        per_row = snapshot()
    assert columns == per_row


@pytest.mark.django_db
def test_the_scenario_reads_its_node_lines_as_columns() -> None:
    _postgres()
    scenario_build()
    inputs, read = inputs_load(month=MONTH)
    node_lines = CostLineItem.objects.filter(service_category="Compute").count()
    # Every node line but each resource's first (staged as a row: it resolves the resource).
    assert len(inputs.block) == node_lines - len(NODES)
    assert read == CostLineItem.objects.count()
    columns, rows = _rows_then_columns()
    assert columns == rows


@pytest.mark.django_db
def test_colliding_digests_read_the_month_as_rows() -> None:
    _postgres()
    scenario_build()
    real = line_columns.distinct_resources

    def colliding(lines: Any) -> object:
        lines.key[:] = 7  # every resource's first half alike: the second tells them apart
        return real(lines)

    with mock.patch.object(line_columns, "distinct_resources", colliding):
        inputs, _ = inputs_load(month=MONTH)
        assert len(inputs.block) == 0
        assert len(inputs.lines) == CostLineItem.objects.count()
        columns, rows = _rows_then_columns()
    assert columns == rows


@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1)), min_size=1))
def test_distinct_rows_are_numpys_unique_rows(pairs: list[tuple[int, int]]) -> None:
    matrix = np.array(pairs, dtype=np.int64)
    distinct, which = line_columns._distinct_rows(matrix)
    assert np.array_equal(distinct[which], matrix)
    assert len(distinct) == len(np.unique(matrix, axis=0))


def test_distinct_rows_sharing_a_fingerprint_are_told_apart() -> None:
    # (0, 0) and (m1, -m0): m1 x m0 - m0 x m1 wraps to 0, the fingerprint of (0, 0).
    mix = line_columns._MIX[:2]
    a = np.array([[0, 0]], dtype=np.int64)
    b = np.array([[int(mix[1]), -int(mix[0])]], dtype=np.int64)
    with np.errstate(over="ignore"):
        assert (b * mix).sum() == (a * mix).sum()
    matrix = np.concatenate([a, b, a])
    distinct, which = line_columns._distinct_rows(matrix)
    assert len(distinct) == 2
    assert np.array_equal(distinct[which], matrix)
