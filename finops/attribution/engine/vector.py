"""The first pass on columns (issue 34): GPU node lines split with NumPy, exact to the stored
decimal, into the same ShareFold as the per-row engine (engine.allocate_lines_into).

What is vectorised: every node whose line items are all single-hour buckets of a known GPU count
(hourly line items of a catalogued instance type: nearly every line of a month). For those, per
line: the jobs overlapping its bucket and by how many seconds, integer weights on the scale
K = lcm(node counts) of the bucket's jobs, idle = capacity - held, and one largest-remainder
split of EffectiveCost, ListCost and ContractedCost (the cost parts plus the split of each
column's difference to the cost, as units.split_columns), all in int64; then the sums per
ledger row, the `spread` pools' job weights, pooled and pending idle (vector_fold.py).

Exactness decides what stays per row: every other line (lines without a node, lines of several
hours or days, nodes of unknown GPU count, which need JobIndex.fallback_capacity, and every line
of such a node, since the lines of a node share their buckets' GPU-seconds) goes through the
per-row engine into the same fold; so does every line of a node where some integer of the split
could pass 2^62 (huge amounts or GPU counts). A part of the month can then be anything between
all columns and all rows; VectorStats says which.

Largest remainder on columns: parts = floor(T x w / D), and the missing units go to the items
with the largest remainders, ties to the earlier item (jobs in id order, idle last), as
units.largest_remainder does. The weights are divided by their gcd per line first (the split
does not change); where T x w could still pass int64 (amounts of dollars over buckets cut at
odd seconds), those products are Python integers (object arrays), and the parts and
remainders, below T and D, are int64 again.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from decimal import Decimal

import numpy as np

from finops.attribution.engine.fold import ShareFold
from finops.attribution.engine.job_block import JobBlock
from finops.attribution.engine.line_block import AMOUNT_LIMIT, LineBlock, Mask
from finops.attribution.engine.node_lines import split_node_line, spread_by_day
from finops.attribution.engine.nodes import JobIndex
from finops.attribution.engine.units import MONEY_PLACES, GpuSeconds
from finops.attribution.engine.values import HOUR, Job, LineItem
from finops.attribution.engine.vector_fold import fold_columns
from finops.attribution.engine.vector_split import Split, VectorStats

# Lines of one chunk of nodes on columns at a time (memory: bench/README).
CHUNK_LINES = 100_000
# Jobs with more GPU micros than this (a million GPUs) leave the whole pass to the rows.
_MICROS_LIMIT = 2**40
# line_block.AMOUNT_LIMIT as an amount (units of 10^-12).
_AMOUNT_LIMIT = Decimal(AMOUNT_LIMIT).scaleb(-MONEY_PLACES)


def _single_bucket(line: LineItem) -> bool:
    start, end = line.start, line.end
    return bool(line.gpus) and end > start and start // HOUR == (end - 1) // HOUR


def _fits(line: LineItem) -> bool:
    """Amounts a LineBlock can hold (line_block.AMOUNT_LIMIT units)."""
    return (
        abs(line.cost) < _AMOUNT_LIMIT
        and abs(line.list_cost) < _AMOUNT_LIMIT
        and abs(line.contracted_cost) < _AMOUNT_LIMIT
    )


def _block_simple(block: LineBlock) -> Mask:
    """Lines of a block that are single buckets of a known GPU count with amounts in range."""
    gpus = block.per_template([t.gpus or 0 for t in block.templates])
    single: Mask = (
        (gpus > 0)
        & (block.end > block.start)
        & (block.start // HOUR == (block.end - 1) // HOUR)
        & (np.abs(block.cost) < AMOUNT_LIMIT)
        & (np.abs(block.list_cost) < AMOUNT_LIMIT)
        & (np.abs(block.contracted) < AMOUNT_LIMIT)
    )
    return single


def allocate_lines_vector(
    lines: Iterable[LineItem],
    jobs: Iterable[Job],
    fold: ShareFold,
    *,
    horizon: int | None = None,
    block: LineBlock | None = None,
) -> VectorStats:
    """engine.allocate_lines_into(lines + block's lines, jobs, fold): the same fold (rows, sums,
    spread weights, pooled and pending idle), the eligible nodes on columns (module docstring).
    block: line items already as columns (the service's column read); their nodes' spread
    pools join the fold's."""
    stats = VectorStats()
    began = time.perf_counter()
    block = LineBlock.empty() if block is None else block
    for template in block.templates:
        if template.spread_pool is not None and template.node is not None:
            fold.node_pool[template.node] = template.spread_pool
    ordered = sorted(lines, key=lambda line: line.id)
    job_list = sorted(jobs, key=lambda job: job.id)
    if horizon is None:
        horizon = max(
            max((line.end for line in ordered), default=0),
            int(block.end.max()) if len(block) else 0,
        )
    simple: dict[str, bool] = {}
    for line in ordered:
        if line.node is not None:
            simple[line.node] = simple.get(line.node, True) and _single_bucket(line) and _fits(line)
    block_simple = _block_simple(block)
    node_of_template = block.node_names()
    for t, ok in _per_template_all(block, block_simple):
        node = node_of_template[t]
        if node is not None:
            simple[node] = simple.get(node, True) and ok
    job_block = JobBlock.of_jobs(job_list)
    if len(job_block) and bool((job_block.micros >= _MICROS_LIMIT).any()):
        simple = dict.fromkeys(simple, False)
    template_simple = np.array(
        [node is not None and simple[node] for node in node_of_template], dtype=np.bool_
    )
    on_columns = template_simple[block.template] if len(block) else np.zeros(0, np.bool_)
    items = [line for line in ordered if line.node is not None and simple[line.node]]
    columns = block.take(on_columns).concat(LineBlock.of_items(items))
    spilled: list[LineItem] = block.take(~on_columns).items()
    for chunk_block, chunk_jobs in _chunks(columns, job_block):
        spilled.extend(_columns(chunk_block, chunk_jobs, fold, horizon, stats))
    rows = [line for line in ordered if line.node is None or not simple[line.node]]
    if spilled:
        rows = sorted(rows + spilled, key=lambda line: line.id)
    stats.row_lines = len(rows)
    if rows:
        per_row_began = time.perf_counter()
        _per_row(rows, job_list, fold, horizon)
        stats.phase("per_row_s", per_row_began)
    stats.phase("first_pass_s", began)
    return stats


def _per_template_all(block: LineBlock, ok: Mask) -> list[tuple[int, bool]]:
    """(template, whether every line of it is ok) for the templates of the block's lines."""
    if not len(block):
        return []
    lines = np.bincount(block.template, minlength=len(block.templates))
    good = np.bincount(block.template, weights=ok, minlength=len(block.templates))
    return [(t, bool(good[t] == lines[t])) for t in np.flatnonzero(lines).tolist()]


def _chunks(block: LineBlock, jobs: JobBlock) -> Iterator[tuple[LineBlock, JobBlock]]:
    """The block's lines by chunks of whole nodes of about CHUNK_LINES lines (each in id
    order), each with the jobs' entries on its nodes (in job order), so the columns' memory is
    that of one chunk."""
    if not len(block):
        return
    names = sorted({t.node for t in block.templates if t.node is not None})
    index = {name: i for i, name in enumerate(names)}
    node = np.array([index.get(t.node or "", 0) for t in block.templates], dtype=np.int64)
    per_node = np.bincount(node[block.template], minlength=len(names)).tolist()
    chunk_of: dict[str, int] = {}
    size = chunk = 0
    for name, count in zip(names, per_node, strict=True):
        if not count:
            continue
        if size >= CHUNK_LINES:
            chunk, size = chunk + 1, 0
        chunk_of[name] = chunk
        size += count
    chunk_of_node = np.array([chunk_of.get(name, 0) for name in names], dtype=np.int64)
    line_chunk = chunk_of_node[node[block.template]]
    order = np.lexsort((block.id, line_chunk))
    bounds = np.searchsorted(line_chunk[order], np.arange(chunk + 2))
    # Each job entry's chunk (-1: a node without lines here); a stable sort keeps job order.
    entry_chunk = np.array([chunk_of.get(name, -1) for name in jobs.nodes], dtype=np.int64)[
        jobs.e_node
    ]
    entry_order = np.argsort(entry_chunk, kind="stable")
    entry_bounds = np.searchsorted(entry_chunk[entry_order], np.arange(chunk + 2))
    for at in range(chunk + 1):
        entries = entry_order[entry_bounds[at] : entry_bounds[at + 1]]
        yield block.take(order[bounds[at] : bounds[at + 1]]), jobs.entries(entries)


def _columns(
    block: LineBlock, jobs: JobBlock, fold: ShareFold, horizon: int, stats: VectorStats
) -> list[LineItem]:
    """One chunk on columns into the fold; nodes with large integers (Split.big_nodes) are
    given back as LineItem values for the rows and the rest of the chunk split again."""
    spilled: list[LineItem] = []
    while len(block):
        columns = Split(block, jobs, horizon, stats)
        if not columns.big_nodes:
            stats.vector_lines += len(block)
            stats.vector_nodes += len(columns.node_names)
            fold_columns(columns, fold, stats)
            break
        stats.big_nodes += len(columns.big_nodes)
        big = np.array([t.node in columns.big_nodes for t in block.templates], dtype=np.bool_)[
            block.template
        ]
        spilled.extend(block.take(big).items())
        block = block.take(~big)
    return spilled


def _per_row(lines: list[LineItem], jobs: list[Job], fold: ShareFold, horizon: int) -> None:
    """engine.allocate_lines_into's loop, for the lines left to it."""
    nodes = {line.node for line in lines if line.node is not None}
    index = JobIndex(jobs, nodes=nodes, horizon=horizon)
    counted: set[tuple[str, int, int]] = set()
    seconds = GpuSeconds()
    for line in lines:
        fold.begin(line)
        if line.node is None:
            spread_by_day(line, line.category, line.team_id, "", fold)
        else:
            split_node_line(line, index, counted, seconds, fold)
