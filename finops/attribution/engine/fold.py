"""Shares summed into ledger rows as the engine makes them (ShareFold), instead of a list of
millions of Share tuples summed afterwards: a month's first pass makes about six shares per
line item, and most of them land on a ledger row that already exists.

What a fold keeps is what a part of a month contributes (attribution/ledger/partial.py, PartResult):
ledger rows keyed (ledger group, day, category, team id, job id, node), and set aside for the
redistribution, which needs every part's sums: the GPU units of jobs on `spread` pools' nodes,
the idle of `spread` node lines (pooled per pool, day and group, and as rows in case the
pool-day has nobody to spread it onto), and the day shares of shared-cost lines.

Sums are made share by share in the engine's order, so every row (its GPU-seconds are Decimal
sums) is exactly what summing the list of shares in that order gives (fold_shares).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from finops.attribution.engine.units import ZERO, GpuSeconds
from finops.attribution.engine.values import GPU_CATEGORIES, IDLE, UNALLOCATED, LineItem, Share

# (ledger group, day, category, team id, job id, node)
FoldKey = tuple[int, int, str, int | None, int | None, str]
# [units, GPU-seconds (Decimal), list units, contracted units]
Rows = dict[FoldKey, list[Any]]
# (pool, day)
PoolDay = tuple[str, int]
# A shared-cost line's day share: (key as unallocated, [units, list units, contracted units],
# (method, fixed weights), provider, currency).
SharedPart = tuple[FoldKey, list[int], tuple[str, tuple[tuple[int, int], ...]], str, str]
# A node line's job hits in one bucket, as node_lines makes them: ((entry, overlap), ...) with
# entry[4:7] = (job id, team id, category).
Hits = Sequence[tuple[tuple[Any, ...], int]]


class ShareFold:
    """Ledger rows and the redistribution's inputs of a set of line items (module docstring).
    The engine calls begin(line) before the shares of each line."""

    __slots__ = (
        "_group",
        "_line",
        "_node_pool",
        "_shared",
        "_spread",
        "job_team",
        "ledger",
        "pending",
        "pooled",
        "shared",
        "spread_weights",
    )  # fmt: skip

    def __init__(self, lines: Iterable[LineItem]) -> None:
        self.ledger: Rows = {}
        # (pool, day) -> job id -> gross GPU units on the pool's nodes; job id -> team id.
        self.spread_weights: dict[PoolDay, dict[int, int]] = {}
        self.job_team: dict[int, int | None] = {}
        # (pool, day, group) -> [idle units, list units, contracted units] to spread, and the
        # same idle as rows (kept when the pool-day has no job with GPU cost).
        self.pooled: dict[tuple[str, int, int], list[int]] = {}
        self.pending: dict[PoolDay, Rows] = {}
        self.shared: list[SharedPart] = []
        # Nodes of `spread` node lines -> their pool: jobs' GPU units there weigh the spread.
        self._node_pool = {
            line.node: line.spread_pool
            for line in lines
            if line.spread_pool is not None and line.node is not None
        }
        self._group = 0
        self._spread: str | None = None
        self._shared: tuple[str, tuple[tuple[int, int], ...]] | None = None
        self._line: LineItem | None = None

    @property
    def node_pool(self) -> dict[str, str]:
        """Nodes of `spread` node lines -> their pool (the vectorised pass weighs the same)."""
        return self._node_pool

    def begin(self, line: LineItem) -> None:
        """The shares that follow are this line's."""
        self._line = line
        self._group = line.group
        # Idle of a spread node line, or of an idle line tied to a pool (unused commitment).
        spread = line.spread_pool is not None and (line.node is not None or line.category == IDLE)
        self._spread = line.spread_pool if spread else None
        shared = line.shared is not None and line.node is None and line.category == UNALLOCATED
        self._shared = (line.shared.method, line.shared.fixed) if shared and line.shared else None

    def append(self, share: Share) -> None:
        """One share of the current line."""
        key = (self._group, share.day, share.category, share.team_id, share.job_id, share.node)
        category = share.category
        if share.job_id is not None and category in GPU_CATEGORIES:
            pool = self._node_pool.get(share.node)
            if pool is not None:
                self._weigh(pool, share.day, share.job_id, share.team_id, share.units)
        elif category == IDLE and share.job_id is None and self._spread is not None:
            acc = self.pooled.setdefault((self._spread, share.day, self._group), [0, 0, 0])
            acc[0] += share.units
            acc[1] += share.list_units
            acc[2] += share.contracted_units
            _add(self.pending.setdefault((self._spread, share.day), {}), key, share)
            return
        elif category == UNALLOCATED and self._shared is not None:
            line = self._line
            assert line is not None
            values = [share.units, share.list_units, share.contracted_units]
            self.shared.append((key, values, self._shared, line.provider, line.currency))
            return
        _add(self.ledger, key, share)

    def extend(self, shares: Iterable[Share]) -> None:
        for share in shares:
            self.append(share)

    def _weigh(self, pool: str, day: int, job_id: int, team_id: int | None, units: int) -> None:
        per_job = self.spread_weights.get((pool, day))
        if per_job is None:
            per_job = self.spread_weights[(pool, day)] = {}
        per_job[job_id] = per_job.get(job_id, 0) + abs(units)
        self.job_team[job_id] = team_id

    def job_hits(
        self, day: int, node: str, hits: Hits, weights: list[int],
        columns: tuple[list[int], list[int], list[int]], gpu_unit: int | None,
        seconds_of: GpuSeconds,
    ) -> None:  # fmt: skip
        """The job shares of one bucket of a node line (node_lines._split_one_bucket), folded
        as append would fold them one by one. gpu_unit None: the bucket's GPU-seconds were
        counted by an earlier line of the node (0 here)."""
        ledger, group = self.ledger, self._group
        pool = self._node_pool.get(node)
        # The bucket's (pool, day) weights, made at its first GPU job share (as _weigh would).
        per_job: dict[int, int] | None = None
        parts, listed, contracted = columns
        for (entry, _), weight, units, list_units, contracted_units in zip(
            hits, weights, parts, listed, contracted, strict=False
        ):
            job_id, team_id, category = entry[4], entry[5], entry[6]
            if pool is not None and category in GPU_CATEGORIES:
                if per_job is None:
                    per_job = self.spread_weights.get((pool, day))
                    if per_job is None:
                        per_job = self.spread_weights[(pool, day)] = {}
                per_job[job_id] = per_job.get(job_id, 0) + abs(units)
                self.job_team[job_id] = team_id
            seconds: Decimal = ZERO if gpu_unit is None else seconds_of[(weight, gpu_unit)]
            key = (group, day, category, team_id, job_id, node)
            acc = ledger.get(key)
            if acc is None:
                ledger[key] = [units, seconds, list_units, contracted_units]
                continue
            acc[0] += units
            if seconds:
                acc[1] += seconds
            acc[2] += list_units
            acc[3] += contracted_units


def _add(rows: Rows, key: FoldKey, share: Share) -> None:
    acc = rows.get(key)
    if acc is None:
        rows[key] = [share.units, share.gpu_seconds, share.list_units, share.contracted_units]
        return
    acc[0] += share.units
    if share.gpu_seconds:
        acc[1] += share.gpu_seconds
    acc[2] += share.list_units
    acc[3] += share.contracted_units


def fold_shares(
    lines: Sequence[LineItem], shares: Iterable[Share], fold: ShareFold | None = None
) -> ShareFold:
    """A list of shares (engine.allocate_lines) folded (into fold, else a new one): what
    allocate_lines_into gives with a ShareFold, the reference its fast path is tested against."""
    if fold is None:
        fold = ShareFold(lines)
    by_id = {line.id: line for line in lines}
    current: int | None = None
    for share in shares:
        if share.line_id != current:
            current = share.line_id
            fold.begin(by_id[current])
        fold.append(share)
    return fold
