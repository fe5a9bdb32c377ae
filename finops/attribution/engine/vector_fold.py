"""The vectorised split (vector.Split) summed into a ShareFold, as the per-row engine's fold
(fold.py) sums its shares: job rows per (ledger group, day, job, node), idle rows per line (in
the ledger, or pooled and pending for `spread` lines), and each job's gross GPU units per
`spread` pool and day.

GPU-seconds are exact: a bucket's GPU-seconds count only on the first line (by id) of its
(node, start, end), as engine `counted` does; a row whose terms all have K of 2s and 5s only
(1-, 2-, 4-, 5-, 8-node jobs, whole or decimal GPUs) is an exact decimal, summed here as an
integer of 10^-12 GPU-seconds, which is what the per-row engine's Decimal sums hold; a row with
another K (a 3-node job, a 1/7 MIG slice) is summed term by term in Decimal in the per-row
engine's order (by line id), as its fold does.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt

from finops.attribution.engine.fold import ShareFold
from finops.attribution.engine.units import CTX, GPU_SCALE, ZERO
from finops.attribution.engine.values import DAY, GPU_CATEGORIES, IDLE
from finops.attribution.engine.vector_split import I64, Split, VectorStats

# GPU-seconds of exact rows as integers of 10^-(6 + _SECONDS_DIGITS): K must divide this power.
_SECONDS_DIGITS = 6
_SECONDS_EXPONENT = -(6 + _SECONDS_DIGITS)
assert GPU_SCALE == 10**6
Mask = npt.NDArray[np.bool_]


def fold_columns(split: Split, fold: ShareFold, stats: VectorStats) -> None:
    import time

    began = time.perf_counter()
    _job_rows(split, fold, stats)
    _idle_rows(split, fold)
    stats.phase("aggregate_s", began)


def _runs(keys: npt.NDArray[np.int64]) -> I64:
    """Where each run of equal rows starts in rows sorted by key."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    change = (keys[1:] != keys[:-1]).any(axis=1)
    starts: I64 = np.flatnonzero(np.r_[True, change])
    return starts


def _counted(split: Split) -> Mask:
    """Lines whose bucket's GPU-seconds they report: the first line by id of each (node,
    start, end) (lines are in id order)."""
    bucket = np.stack([split.l_node, split.l_start, split.l_end], axis=1)
    _, first_line = np.unique(bucket, axis=0, return_index=True)
    counted = np.zeros(len(split.block), dtype=np.bool_)
    counted[first_line] = True
    return counted


def _exact(k: I64) -> Mask:
    """K whose GPU-seconds are exact decimals of at most 12 places (K | 10^6)."""
    exact: Mask = (10**_SECONDS_DIGITS % k) == 0
    return exact


def _job_rows(split: Split, fold: ShareFold, stats: VectorStats) -> None:
    is_hit = split.i_hit >= 0
    hit = split.i_hit[is_hit]
    line = split.i_line[is_hit]
    parts = [p[is_hit] for p in split.parts]
    job = split.e_job[split.h_entry[hit]]
    node = split.l_node[line]
    day = split.l_start[line] // DAY
    group = split.block.group[line]
    k = split.k[line]
    weight = np.where(_counted(split)[line], split.h_weight[hit], 0)
    # Exact terms as integers, unless the integers could pass int64 (then Decimal, exact too).
    exact = _exact(k) & (weight.astype(np.float64) * (10**_SECONDS_DIGITS / k) < 2.0**58)
    numerator = np.where(exact, weight * (10**_SECONDS_DIGITS // k), 0)
    order = np.lexsort((line, job, day, group, node))
    keys = np.stack([node, group, day, job], axis=1)[order]
    starts = _runs(keys)
    sums = [np.add.reduceat(p[order], starts).tolist() for p in parts] if len(order) else [[]] * 3
    seconds = np.add.reduceat(numerator[order], starts).tolist() if len(order) else []
    inexact = (~exact & (weight > 0))[order].astype(np.int64)
    decimal_rows = np.zeros(len(starts), dtype=np.bool_)
    if len(order):
        decimal_rows = np.add.reduceat(inexact, starts) > 0
        decimal_rows |= np.add.reduceat(numerator[order].astype(np.float64), starts) >= 2.0**62
    stats.decimal_rows = int(decimal_rows.sum())
    terms = _decimal_seconds(order, starts, decimal_rows, weight, k)
    # The rows as dict items, built column by column. Their keys are new to the fold: each
    # names a node of this split, whose lines no other pass saw.
    names, jobs = split.node_names, split.jobs
    rows = keys[starts].T.tolist() if len(order) else [[], [], [], []]
    n, g, d, _ = rows
    j = keys[starts, 3] if len(order) else np.zeros(0, dtype=np.int64)
    exponent = _SECONDS_EXPONENT
    gpu_seconds = [Decimal(s).scaleb(exponent) if s else ZERO for s in seconds]
    for r, value in terms.items():
        gpu_seconds[r] = value
    fold.ledger.update(
        zip(
            zip(
                g, d, jobs.job_categories(j), jobs.job_teams(j), jobs.job_ids(j),
                [names[x] for x in n], strict=True,
            ),
            map(list, zip(sums[0], gpu_seconds, sums[1], sums[2], strict=True)),
            strict=True,
        )
    )  # fmt: skip
    _spread_weights(split, fold, node, day, job, parts[0])


def _decimal_seconds(
    order: I64, starts: I64, decimal_rows: Mask, weight: I64, k: I64
) -> dict[int, Decimal]:
    """GPU-seconds of rows with a K outside 2s and 5s: the terms weight / (K x 10^6) summed in
    Decimal in the per-row engine's order (line id), as its fold adds them (a row's first term
    as it is, then each non-zero term added in the context's precision)."""
    result: dict[int, Decimal] = {}
    ends = np.r_[starts[1:], len(order)]
    for row in np.flatnonzero(decimal_rows).tolist():
        total: Decimal | None = None
        for i in order[starts[row] : ends[row]].tolist():
            w = int(weight[i])
            term = CTX.divide(Decimal(w), Decimal(int(k[i]) * GPU_SCALE)) if w else ZERO
            if total is None:
                total = term
            elif term:
                total += term
        result[row] = ZERO if total is None else total
    return result


def _spread_weights(
    split: Split, fold: ShareFold, node: I64, day: I64, job: I64, cost: I64
) -> None:
    """Each GPU job's gross cost units per (pool, day) on the nodes of `spread` pools."""
    pool_of = [fold.node_pool.get(name) for name in split.node_names]
    if not any(pool_of):
        return
    pool_names = sorted({p for p in pool_of if p is not None})
    pool_index = {p: i for i, p in enumerate(pool_names)}
    pool_of_node = np.array([-1 if p is None else pool_index[p] for p in pool_of], dtype=np.int64)
    jobs = split.jobs
    gpu_category = np.array([c in GPU_CATEGORIES for c in jobs.categories], dtype=np.bool_)
    chosen = (pool_of_node[node] >= 0) & gpu_category[jobs.category[job]]
    if not chosen.any():
        return
    pool, day, job = pool_of_node[node][chosen], day[chosen], job[chosen]
    gross = np.abs(cost[chosen])
    order = np.lexsort((job, day, pool))
    keys = np.stack([pool, day, job], axis=1)[order]
    starts = _runs(keys)
    totals = np.add.reduceat(gross[order], starts).tolist()
    at = keys[starts, 2]
    for (p, d, _), job_id, team_id, total in zip(
        keys[starts].tolist(), jobs.job_ids(at), jobs.job_teams(at), totals, strict=True
    ):
        per_job = fold.spread_weights.setdefault((pool_names[p], d), {})
        per_job[job_id] = per_job.get(job_id, 0) + total
        fold.job_team[job_id] = team_id


def _idle_rows(split: Split, fold: ShareFold) -> None:
    """Idle parts summed per (ledger group, day, owner team, node): a row of the ledger, or for
    `spread` lines pooled per (pool, day, group) and kept aside as a pending row (the reduce
    spreads it or keeps it). Integer sums: the order they are made in does not matter."""
    is_idle = split.i_hit < 0
    line = split.i_line[is_idle]
    if not len(line):
        return
    block = split.block
    used = np.unique(block.template[line]).tolist()
    templates = block.templates
    teams = sorted({templates[t].team_id for t in used}, key=lambda t: (t is not None, t or 0))
    team_index = {t: i for i, t in enumerate(teams)}
    named = sorted(
        {str(templates[t].spread_pool) for t in used if templates[t].spread_pool is not None}
    )
    pools: list[str | None] = [None, *named]
    pool_index = {p: i for i, p in enumerate(pools)}
    template_team = np.zeros(len(templates), dtype=np.int64)
    template_pool = np.zeros(len(templates), dtype=np.int64)
    for t in used:
        template_team[t] = team_index[templates[t].team_id]
        template_pool[t] = pool_index[templates[t].spread_pool]
    of_line = block.template[line]
    per_line = np.stack([block.group[line], template_team[of_line], template_pool[of_line]], 1)
    day = split.l_start[line] // DAY
    keys = np.stack([split.l_node[line], day, per_line[:, 0], per_line[:, 1], per_line[:, 2]], 1)
    order = np.lexsort(keys.T[::-1])
    keys = keys[order]
    starts = _runs(keys)
    sums = [np.add.reduceat(p[is_idle][order], starts).tolist() for p in split.parts]
    for (n, d, g, t, p), units, list_units, contracted_units in zip(
        keys[starts].tolist(), *sums, strict=True
    ):
        key = (g, d, IDLE, teams[t], None, split.node_names[n])
        values: list[Any] = [units, ZERO, list_units, contracted_units]
        pool = pools[p]
        if pool is None:
            _add(fold.ledger, key, values)
            continue
        acc = fold.pooled.setdefault((pool, d, g), [0, 0, 0])
        acc[0] += units
        acc[1] += list_units
        acc[2] += contracted_units
        _add(fold.pending.setdefault((pool, d), {}), key, values)


def _add(rows: dict[Any, list[Any]], key: Any, values: list[Any]) -> None:
    acc = rows.get(key)
    if acc is None:
        rows[key] = values
        return
    acc[0] += values[0]
    if values[1]:
        acc[1] += values[1]
    acc[2] += values[2]
    acc[3] += values[3]
