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

from finops.attribution.engine.fold import ShareFold
from finops.attribution.engine.node_lines import split_node_line, spread_by_day
from finops.attribution.engine.nodes import JobIndex
from finops.attribution.engine.units import GpuSeconds
from finops.attribution.engine.values import HOUR, Job, LineItem
from finops.attribution.engine.vector_fold import fold_columns
from finops.attribution.engine.vector_split import Split, VectorStats

# Lines of one chunk of nodes on columns at a time (memory: bench/README).
CHUNK_LINES = 100_000
# Jobs with more GPU micros than this (a million GPUs) leave the whole pass to the rows.
_MICROS_LIMIT = 2**40


def _single_bucket(line: LineItem) -> bool:
    start, end = line.start, line.end
    return bool(line.gpus) and end > start and start // HOUR == (end - 1) // HOUR


def allocate_lines_vector(
    lines: Iterable[LineItem],
    jobs: Iterable[Job],
    fold: ShareFold,
    *,
    horizon: int | None = None,
) -> VectorStats:
    """engine.allocate_lines_into(lines, jobs, fold): the same fold (rows, sums, spread weights,
    pooled and pending idle), the eligible nodes on columns (module docstring)."""
    stats = VectorStats()
    began = time.perf_counter()
    ordered = sorted(lines, key=lambda line: line.id)
    job_list = sorted(jobs, key=lambda job: job.id)
    if horizon is None:
        horizon = max((line.end for line in ordered), default=0)
    simple: dict[str, bool] = {}
    for line in ordered:
        if line.node is not None:
            simple[line.node] = simple.get(line.node, True) and _single_bucket(line)
    if any(job.gpu_micros >= _MICROS_LIMIT for job in job_list):
        simple = dict.fromkeys(simple, False)
    for chunk_lines, chunk_jobs in _chunks(ordered, job_list, simple):
        _columns(chunk_lines, chunk_jobs, fold, horizon, simple, stats)
    rows = [line for line in ordered if line.node is None or not simple[line.node]]
    stats.row_lines = len(rows)
    if rows:
        per_row_began = time.perf_counter()
        _per_row(rows, job_list, fold, horizon)
        stats.phase("per_row_s", per_row_began)
    stats.phase("first_pass_s", began)
    return stats


def _chunks(
    ordered: list[LineItem], jobs: list[Job], simple: dict[str, bool]
) -> Iterator[tuple[list[LineItem], list[Job]]]:
    """The eligible lines by chunks of whole nodes of about CHUNK_LINES lines, each with the
    jobs that ran on its nodes (in id order), so the columns' memory is that of one chunk."""
    chunk_of: dict[str, int] = {}
    size = chunk = 0
    per_node: dict[str, int] = {}
    for line in ordered:
        if line.node is not None and simple[line.node]:
            per_node[line.node] = per_node.get(line.node, 0) + 1
    for node in sorted(per_node):
        if size >= CHUNK_LINES:
            chunk, size = chunk + 1, 0
        chunk_of[node] = chunk
        size += per_node[node]
    if not chunk_of:
        return
    chunk_lines: list[list[LineItem]] = [[] for _ in range(chunk + 1)]
    chunk_jobs: list[list[Job]] = [[] for _ in range(chunk + 1)]
    for line in ordered:
        if line.node is not None and line.node in chunk_of:
            chunk_lines[chunk_of[line.node]].append(line)
    for job in jobs:
        for index in {chunk_of[node] for node in job.nodes if node in chunk_of}:
            chunk_jobs[index].append(job)
    for index in range(chunk + 1):
        yield chunk_lines[index], chunk_jobs[index]
        chunk_lines[index], chunk_jobs[index] = [], []


def _columns(
    lines: list[LineItem], jobs: list[Job], fold: ShareFold, horizon: int,
    simple: dict[str, bool], stats: VectorStats,
) -> None:  # fmt: skip
    """One chunk on columns into the fold; nodes with large integers (Split.big_nodes) are
    marked for the rows and the rest of the chunk split again."""
    while lines:
        columns = Split(lines, jobs, horizon, stats)
        if not columns.big_nodes:
            stats.vector_lines += len(columns.lines)
            stats.vector_nodes += len(columns.node_names)
            fold_columns(columns, fold, stats)
            return
        stats.big_nodes += len(columns.big_nodes)
        for node in columns.big_nodes:
            simple[node] = False
        lines = [line for line in lines if line.node is not None and simple[line.node]]


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
