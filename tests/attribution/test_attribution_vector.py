"""The vectorised first pass (engine/vector.py, FINOPS_ATTRIBUTION_ENGINE=vector) folds exactly
what the per-row engine folds: the same ledger rows with the same amounts, list and contracted
units, GPU-seconds to the last decimal (raw and as stored), the same `spread` weights, pooled
and pending idle and shared-cost parts, on the engine's drawn months and on drawn months of
hourly node lines (the shape it vectorises: fractional and MIG GPUs, jobs on 1-3 nodes,
running jobs, overlapping and repeated buckets, credits, ListCost and ContractedCost)."""

from __future__ import annotations

from decimal import Decimal
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from finops.attribution.engine import (
    INFERENCE,
    TRAINING,
    Job,
    LineItem,
    ShareFold,
    allocate_lines_into,
    vector,
)
from finops.attribution.engine.vector import allocate_lines_vector
from finops.attribution.ledger.writer import finish
from tests.strategies import BASE, JobSpec, LineSpec, engine_examples, engine_inputs

NODES = ["g0", "g1", "g2", "g3", "g4"]
HOURS = 30


def _state(fold: ShareFold) -> dict[str, object]:
    return {
        "ledger": dict(fold.ledger),
        # Sorted text of the stored rows: Decimal equality alone would ignore exponents.
        "stored": sorted(map(repr, finish(fold.ledger).items())),
        "spread_weights": fold.spread_weights,
        "job_team": fold.job_team,
        "pooled": fold.pooled,
        "pending": fold.pending,
        "pending_stored": sorted(
            repr(sorted(map(repr, finish(v).items()))) for v in fold.pending.values()
        ),
        "shared": sorted(fold.shared, key=repr),
    }


def _both(lines: list[LineItem], jobs: list[Job]) -> tuple[dict[str, object], dict[str, object]]:
    rows = ShareFold(lines)
    allocate_lines_into(lines, jobs, rows)
    columns = ShareFold(lines)
    allocate_lines_vector(lines, jobs, columns)
    return _state(columns), _state(rows)


@engine_examples
def test_vector_folds_the_engine_examples_as_the_rows(
    job_specs: list[JobSpec], line_specs: list[LineSpec], spread: dict[str, str]
) -> None:
    lines, jobs = engine_inputs(job_specs, line_specs, spread)
    columns, rows = _both(lines, jobs)
    assert columns == rows


@st.composite
def hourly_month(draw: st.DrawFn) -> tuple[list[LineItem], list[Job]]:
    pools = draw(st.dictionaries(st.sampled_from(NODES), st.sampled_from(["p1", "p2"])))
    gpus_of = {n: draw(st.sampled_from([1, 2, 4, 8])) for n in NODES}
    lines: list[LineItem] = []
    for i in range(draw(st.integers(min_value=1, max_value=40))):
        node = draw(st.sampled_from(NODES))
        hour = draw(st.integers(min_value=0, max_value=HOURS))
        start = BASE + hour * 3600
        end = start + 3600
        if draw(st.integers(min_value=0, max_value=5)) == 0:  # a partial hour
            start += draw(st.integers(min_value=0, max_value=3000))
            end = start + draw(
                st.integers(min_value=1, max_value=BASE + hour * 3600 + 3600 - start)
            )
        cost = Decimal(
            draw(st.one_of(
                st.integers(min_value=-(10**15), max_value=10**15),
                st.integers(min_value=-9, max_value=9),
                st.just(98_320_000_000_000),
                st.integers(min_value=-(10**20), max_value=10**20),
            ))
        ).scaleb(-12)  # fmt: skip
        extra = [
            Decimal(draw(st.integers(min_value=-(10**14), max_value=10**14))).scaleb(-12)
            if draw(st.booleans())
            else Decimal(0)
            for _ in range(2)
        ]
        lines.append(
            LineItem(
                i + 1, start, end, cost, node, gpus_of[node],
                team_id=draw(st.sampled_from([None, 9])),
                group=draw(st.integers(min_value=0, max_value=1)), provider="AWS", currency="USD",
                spread_pool=pools.get(node), list_cost=cost + extra[0],
                contracted_cost=cost + extra[1],
            )
        )  # fmt: skip
    jobs: list[Job] = []
    for j in range(draw(st.integers(min_value=0, max_value=30))):
        begin = BASE + draw(st.integers(min_value=-3600, max_value=HOURS * 3600))
        running = draw(st.integers(min_value=0, max_value=6)) == 0
        stop = None if running else begin + draw(st.integers(min_value=-10, max_value=20 * 3600))
        nodes = draw(st.lists(st.sampled_from([*NODES, "elsewhere"]), min_size=1, max_size=4))
        micros = draw(st.sampled_from([10**6, 2 * 10**6, 8 * 10**6, 500_000, 1, 3_333_333]))
        jobs.append(
            Job(
                100 + j, tuple(nodes), begin, stop, micros * len(set(nodes)),
                team_id=draw(st.sampled_from([1, 2, None])),
                gpu_denominator=draw(st.sampled_from([1, 1, 7])),
                category=draw(st.sampled_from([TRAINING, TRAINING, INFERENCE])),
            )
        )  # fmt: skip
    return lines, jobs


@settings(max_examples=300, deadline=None)
@given(month=hourly_month())
def test_vector_folds_hourly_node_lines_as_the_rows(
    month: tuple[list[LineItem], list[Job]],
) -> None:
    lines, jobs = month
    columns, rows = _both(lines, jobs)
    assert columns == rows
    # The same in chunks of a few lines' nodes at a time (vector.CHUNK_LINES).
    with mock.patch.object(vector, "CHUNK_LINES", 4):
        chunked, _ = _both(lines, jobs)
    assert chunked == rows


def test_vector_splits_hourly_lines_on_columns_and_leaves_the_rest_to_the_rows() -> None:
    hour = 3600
    lines = [
        LineItem(1, BASE, BASE + hour, Decimal("98.32"), "g0", 8),
        LineItem(2, BASE + hour, BASE + 2 * hour, Decimal("98.32"), "g0", 8),
        # A daily line: its node goes to the rows, as do lines without a node.
        LineItem(3, BASE, BASE + 86400, Decimal("2000"), "g1", 8),
        LineItem(4, BASE, BASE + 86400, Decimal("12.5"), None),
    ]
    jobs = [
        Job(1, ("g0",), BASE + 1800, BASE + 2 * hour, 4 * 10**6, team_id=1),
        Job(2, ("g0", "g1", "g2"), BASE, BASE + hour, 3 * 10**6, team_id=2),
    ]
    fold = ShareFold(lines)
    stats = allocate_lines_vector(lines, jobs, fold)
    assert (stats.vector_lines, stats.vector_nodes, stats.row_lines) == (2, 1, 2)
    # Amounts in 10^-12 units. Job 2 holds 1 GPU on g0 in the first hour, job 1 4 GPUs for
    # 1,800 s then for the whole second hour. The first hour's K is lcm(1, 3) = 3, so both jobs'
    # rows there are summed in Decimal.
    assert stats.decimal_rows == 2
    day = BASE // 86400
    assert finish(fold.ledger)[(0, day, TRAINING, 2, 2, "g0")][:2] == [
        12_290_000_000_000, Decimal("3600.000000"),
    ]  # fmt: skip
    assert finish(fold.ledger)[(0, day, TRAINING, 1, 1, "g0")][:2] == [
        73_740_000_000_000, Decimal("21600.000000"),
    ]  # fmt: skip
    reference = ShareFold(lines)
    allocate_lines_into(lines, jobs, reference)
    assert _state(fold) == _state(reference)
