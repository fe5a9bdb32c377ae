"""Hypothesis strategies for attribution's inputs: jobs and line items over three days from
2025-06-01 00:00 UTC (seconds from BASE), on a few GPU nodes, in three provider/account/currency
groups, with spread idle pools and shared-cost rules."""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from finops.attribution.engine import (
    EVEN,
    FIXED,
    GPU_SPEND,
    TAGGED,
    UNALLOCATED,
    Job,
    LineItem,
    SharedRule,
)
from finops.core.money import MONEY_PLACES

# (start, end or None while running, GPUs, nodes), seconds from BASE.
JobSpec = tuple[int, int | None, Decimal, list[str]]
# (start, end, cost, node, GPU count, "node"/"tagged"/"untagged", (provider, account, currency),
# shared rule of an untagged line).
LineSpec = tuple[
    int, int, Decimal, str | None, int | None, str, tuple[str, str, str], SharedRule | None
]

BASE = calendar.timegm(dt.datetime(2025, 6, 1).timetuple())
HORIZON = 3 * 86400  # three days of activity keeps examples small and still crosses midnights
NODES = ["n0", "n1", "n2", "n3"]
DIMS = [("AWS", "111", "USD"), ("AWS", "222", "USD"), ("GCP", "g1", "EUR")]
# Idle policy per node: None (keep) or a spread pool; shared rule per unallocated line.
pools = st.dictionaries(st.sampled_from([*NODES, "lonely"]), st.sampled_from(["p1", "p2"]))
shared_rules = st.one_of(
    st.none(),
    st.just(SharedRule(EVEN)),
    st.just(SharedRule(GPU_SPEND)),
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=9), st.integers(min_value=0, max_value=10**8)),
        max_size=3,
    ).map(lambda rows: SharedRule(FIXED, tuple(rows))),
)

seconds = st.integers(min_value=0, max_value=HORIZON)
gpus = st.one_of(
    st.integers(min_value=1, max_value=16).map(Decimal),
    st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(9), places=6),
)


@st.composite
def jobs(draw: st.DrawFn) -> JobSpec:
    start = draw(seconds)
    running = draw(st.booleans()) and draw(st.booleans())
    end = None if running else start + draw(st.integers(min_value=-60, max_value=40 * 3600))
    nodes = draw(st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True))
    return start, end, draw(gpus), nodes


@st.composite
def line_items(draw: st.DrawFn) -> LineSpec:
    shape = draw(st.sampled_from(["hourly", "daily", "partial", "long", "instant"]))
    if shape == "hourly":
        start = draw(st.integers(min_value=0, max_value=HORIZON // 3600)) * 3600
        end = start + 3600
    elif shape == "daily":
        start = draw(st.integers(min_value=0, max_value=2)) * 86400
        end = start + 86400
    elif shape == "partial":
        start = draw(seconds)
        end = start + draw(st.integers(min_value=1, max_value=5 * 3600))
    elif shape == "long":
        start = draw(seconds)
        end = start + draw(st.integers(min_value=86400, max_value=4 * 86400))
    else:
        start = end = draw(seconds)
    # Amounts in units of 10^-12: up to a million dollars with all 12 decimals (more significant
    # digits than a float holds), and tiny ones that do not divide evenly.
    units = draw(
        st.one_of(
            st.integers(min_value=-(10**18), max_value=10**18),
            st.integers(min_value=-50, max_value=50),
            st.just(0),
        )
    )
    cost = Decimal(units).scaleb(-MONEY_PLACES)
    kind = draw(st.sampled_from(["node", "node", "tagged", "untagged"]))
    node = draw(st.sampled_from([*NODES, "lonely"])) if kind == "node" else None
    gpu_count = draw(st.sampled_from([None, 1, 4, 8])) if node else None
    dims = draw(st.sampled_from(DIMS))
    shared = draw(shared_rules) if kind == "untagged" else None
    return start, end, cost, node, gpu_count, kind, dims, shared


def engine_examples(test: Callable[..., None]) -> Callable[..., None]:
    """An engine property over 300 drawn months: the test takes job_specs, line_specs and spread
    (what engine_inputs turns into the engine's values)."""
    drawn = given(
        job_specs=st.lists(jobs(), max_size=12),
        line_specs=st.lists(line_items(), min_size=1, max_size=12),
        spread=pools,
    )
    return settings(max_examples=300, deadline=None)(drawn(test))


def engine_inputs(
    job_specs: list[JobSpec], line_specs: list[LineSpec], spread: dict[str, str]
) -> tuple[list[LineItem], list[Job]]:
    """The engine's values of drawn specs: line i has id i + 1, job i id i + 1 (team 1-3);
    tagged lines belong to team 7; spread: the idle pool of each node."""
    job_inputs = [
        Job(
            id=i + 1,
            nodes=tuple(nodes),
            start=BASE + start,
            end=None if end is None else BASE + end,
            gpu_micros=int(g * 10**6),
            team_id=(i % 3) + 1,
        )
        for i, (start, end, g, nodes) in enumerate(job_specs)
    ]
    lines = []
    for i, (start, end, cost, node, gpu_count, kind, dims, shared) in enumerate(line_specs):
        category = TAGGED if kind == "tagged" else UNALLOCATED
        team = 7 if kind == "tagged" else None
        provider, _, currency = dims
        lines.append(
            LineItem(
                i + 1, BASE + start, BASE + end, cost, node, gpu_count, category, team,
                group=DIMS.index(dims), provider=provider, currency=currency,
                spread_pool=spread.get(node) if node else None, shared=shared,
            )
        )  # fmt: skip
    return lines, job_inputs
