"""The vectorised split of issue 34 (see engine/vector.py): inputs into NumPy columns, the
jobs of each hour bucket, integer weights, and the largest-remainder parts of every item of
every line in the three money columns. No fold written here: vector_fold.py sums the parts."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from finops.attribution.engine.job_block import JobBlock
from finops.attribution.engine.line_block import LineBlock
from finops.attribution.engine.units import GPU_SCALE
from finops.attribution.engine.values import HOUR

I64 = npt.NDArray[np.int64]
# Every integer of the split stays at most this (T x w, weights, capacities).
LIMIT = 2**62
# Denominators up to this are split in int64 whatever the amount (remainder x weight < D x D).
_SQUARE_LIMIT = 2**31


@dataclass(slots=True)
class VectorStats:
    """What the vectorised pass did (the bench prints it; the tests check the fallbacks)."""

    vector_lines: int = 0
    vector_nodes: int = 0
    # Lines left to the per-row engine; nodes sent there because of large integers.
    row_lines: int = 0
    big_nodes: int = 0
    # Ledger rows whose GPU-seconds were summed term by term in Decimal (K outside 2s and 5s).
    decimal_rows: int = 0
    phases: dict[str, float] = field(default_factory=dict)

    def phase(self, name: str, began: float) -> float:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - began
        return now


def segments(owner: I64, size: int) -> tuple[I64, I64]:
    """Count and first index of each owner's run in an array sorted by owner."""
    count = np.bincount(owner, minlength=size).astype(np.int64)
    return count, np.cumsum(count) - count


class Split:
    """The vectorised split of lines that are each one hour bucket of one node: the jobs in
    each bucket (hits), the items of each line (its hits, then its idle if any) with integer
    weights, and each item's parts of the three columns. No fold written here: a node whose
    integers are too large (big_nodes) is sent to the rows and the split made again."""

    def __init__(self, block: LineBlock, jobs: JobBlock, horizon: int, stats: VectorStats):
        began = time.perf_counter()
        self.block = block
        self._read(jobs, horizon)
        began = stats.phase("read_s", began)
        self._hits()
        self._weights()
        began = stats.phase("split_s", began)
        self.big_nodes: set[str] = set()
        self._round()
        stats.phase("round_s", began)

    def _read(self, jobs: JobBlock, horizon: int) -> None:
        block = self.block
        template_nodes = [t.node or "" for t in block.templates]
        self.node_names = sorted({template_nodes[t] for t in np.unique(block.template).tolist()})
        node_index = {name: i for i, name in enumerate(self.node_names)}
        per_template = np.array([node_index.get(n, 0) for n in template_nodes], dtype=np.int64)
        gpus = np.array([t.gpus or 0 for t in block.templates], dtype=np.int64)
        self.l_node = per_template[block.template]
        self.l_start, self.l_end = block.start, block.end
        self.l_gpus = gpus[block.template]
        # A block's amounts are below AMOUNT_LIMIT (line_block.py), so these fit int64.
        cost = block.cost
        self.signed: tuple[I64, I64, I64] = (
            cost, block.list_cost - cost, block.contracted - cost,
        )  # fmt: skip
        self._read_jobs(jobs, horizon, node_index)

    def _read_jobs(self, jobs: JobBlock, horizon: int, node_index: dict[str, int]) -> None:
        """Job-node entries on this split's nodes, by JobIndex's rules: in job order, each node
        of a job once, running jobs to the horizon, nothing for jobs without time, GPUs or
        nodes. e_job is the job's index in the JobBlock (self.jobs): in id order, as the
        per-row engine takes them."""
        local = np.full(len(jobs.nodes), -1, dtype=np.int64)
        for name, i in node_index.items():
            at = jobs.node_at.get(name)
            if at is not None:
                local[at] = i
        ends = jobs.ends(horizon)
        valid = (ends > jobs.start) & (jobs.micros > 0) & (jobs.node_count > 0)
        e_node = local[jobs.e_node]
        keep = (e_node >= 0) & valid[jobs.e_job]
        e_job = jobs.e_job[keep]
        self.jobs = jobs
        self.e_node, self.e_job = e_node[keep], e_job
        self.e_start, self.e_end = jobs.start[e_job], ends[e_job]
        self.e_micros = jobs.micros[e_job]
        self.e_count = jobs.node_count[e_job] * jobs.denominator[e_job]

    def _hits(self) -> None:
        """Per line, the job entries overlapping its bucket (in job id order) and the overlap."""
        hour0 = int(self.l_start.min()) // HOUR
        hours = int(self.l_start.max()) // HOUR - hour0 + 1
        first = np.maximum(self.e_start // HOUR, hour0)
        last = np.minimum((self.e_end - 1) // HOUR, hour0 + hours - 1)
        span = np.maximum(last - first + 1, 0)
        entry = np.repeat(np.arange(len(span), dtype=np.int64), span)
        offset = np.cumsum(span) - span
        hour = first[entry] + (np.arange(len(entry), dtype=np.int64) - offset[entry])
        key = self.e_node[entry] * hours + (hour - hour0)
        order = np.argsort(key, kind="stable")  # stable: job id order within a node hour
        key, entry = key[order], entry[order]
        del order, hour, offset
        line_key = self.l_node * hours + (self.l_start // HOUR - hour0)
        low = np.searchsorted(key, line_key, "left")
        count = np.searchsorted(key, line_key, "right") - low
        h_line = np.repeat(np.arange(len(line_key), dtype=np.int64), count)
        within = np.arange(len(h_line), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
        h_entry = entry[low[h_line] + within]
        overlap = np.minimum(self.e_end[h_entry], self.l_end[h_line]) - np.maximum(
            self.e_start[h_entry], self.l_start[h_line]
        )
        keep = overlap > 0
        self.h_line, self.h_entry, self.h_overlap = h_line[keep], h_entry[keep], overlap[keep]

    def _weights(self) -> None:
        """Integer weights of each line's items: its hits (in job order), then its idle."""
        n = len(self.block)
        h_line, h_entry = self.h_line, self.h_entry
        h_count, h_first = segments(h_line, n)
        has = h_count > 0
        counts = self.e_count[h_entry]
        k = np.ones(n, dtype=np.int64)
        if len(h_line):
            k[has] = np.lcm.reduceat(counts, h_first[has])
        scale = k[h_line] // counts
        length = self.l_end - self.l_start
        # The same products in float first: a line near int64's range sends its node to the rows.
        approx = self.e_micros[h_entry].astype(np.float64) * scale * self.h_overlap
        capacity_f = self.l_gpus.astype(np.float64) * GPU_SCALE * k * length
        big = capacity_f >= LIMIT / 8
        if len(h_line):
            big |= np.bincount(h_line, weights=approx, minlength=n) >= LIMIT / 8
        safe = ~big[h_line]
        h_weight = np.where(safe, self.e_micros[h_entry], 0) * scale * self.h_overlap
        held = np.zeros(n, dtype=np.int64)
        if len(h_line):
            held[has] = np.add.reduceat(h_weight, h_first[has])
        capacity = np.where(big, held + 1, self.l_gpus * GPU_SCALE * k * length)
        idle = np.where(capacity > held, capacity - held, 0)
        idle_line = np.flatnonzero(idle > 0)
        # Items: hits then idle, grouped by line (a stable sort keeps the hits in job order).
        i_line = np.concatenate([h_line, idle_line])
        i_weight = np.concatenate([np.where(safe, h_weight, 1), idle[idle_line]])
        i_hit = np.concatenate(
            [np.arange(len(h_line), dtype=np.int64), np.full(len(idle_line), -1)]
        )
        order = np.argsort(i_line, kind="stable")
        self.i_line, self.i_weight, self.i_hit = i_line[order], i_weight[order], i_hit[order]
        self.i_count, self.i_first = segments(self.i_line, n)
        self.h_weight, self.k, self.big = h_weight, k, big

    def _round(self) -> None:
        """Each column's largest-remainder parts of every item (signed)."""
        first, line = self.i_first, self.i_line
        gcd = np.gcd.reduceat(self.i_weight, first)
        reduced = self.i_weight // gcd[line]
        denominator = np.add.reduceat(reduced, first)
        limit = LIMIT // denominator
        magnitudes: list[I64] = []
        for values in self.signed:
            magnitude = np.abs(values)
            huge = (magnitude > LIMIT).astype(np.bool_)
            self.big |= huge
            magnitudes.append(np.where(huge, 0, magnitude).astype(np.int64))
        # T x w / D is computed as q x w + r x w / D (T = q x D + r): exact in int64 while
        # r x w < D x D fits, or T x w itself does; else in Python integers (object arrays).
        over = (magnitudes[0] > limit) | (magnitudes[1] > limit) | (magnitudes[2] > limit)
        self.wide = over & (denominator > _SQUARE_LIMIT)
        if self.big.any():
            self.big_nodes = {self.node_names[i] for i in np.unique(self.l_node[self.big])}
            return
        position = np.arange(len(line), dtype=np.int64) - first[line]
        order_key = (position, line)
        cost = self._split(magnitudes[0], self.signed[0], reduced, denominator, order_key)
        self.parts: list[I64] = [cost]
        for magnitude, signed in zip(magnitudes[1:], self.signed[1:], strict=True):
            self.parts.append(
                cost + self._split(magnitude, signed, reduced, denominator, order_key)
            )

    def _split(
        self,
        total: I64,
        signed: I64,
        weight: I64,
        denominator: I64,
        order_key: tuple[I64, I64],
    ) -> I64:
        """largest_remainder(|amount|, weights) of every line at once, the sign given back."""
        line = self.i_line
        wide = self.wide[line]
        narrow = np.where(self.wide, 0, total)
        quotient, rest = np.divmod(narrow, denominator)
        below = denominator[line]
        parts, remainder = np.divmod(rest[line] * weight, below)
        parts += quotient[line] * weight
        if wide.any():
            exact = total[line][wide].astype(object) * weight[wide].astype(object)
            wide_below = below[wide].astype(object)
            parts[wide] = (exact // wide_below).astype(np.int64)
            remainder[wide] = (exact % wide_below).astype(np.int64)
        missing = total - np.add.reduceat(parts, self.i_first)
        if missing.any():
            # Only the items of lines missing units (whole lines, contiguous): by line, the
            # largest remainder first, ties to the earlier item.
            position, _ = order_key
            chosen = np.flatnonzero(missing[line] > 0)
            c_line = line[chosen]
            order = np.lexsort((position[chosen], -remainder[chosen], c_line))
            count = np.where(missing > 0, self.i_count, 0)
            first = np.cumsum(count) - count
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order), dtype=np.int64) - first[c_line[order]]
            parts[chosen] += rank < missing[c_line]
        negative = (signed < 0).astype(np.bool_)
        result: I64 = np.where(negative[line], -parts, parts)
        return result
