"""A month's attribution in parts: what one part of the line items contributes (PartResult), and
the one reduction that merges the parts into the month's ledger (month_ledger_reduce).

A part is a set of line items that holds every line of each of its nodes (the plan cuts the
month by billed resource, services.attribution_month_plan). Its first pass (engine.allocate_lines)
is exactly the unsplit month's first pass restricted to its lines: a node line's split depends
only on its node's jobs and on the earlier lines of the same node. What couples parts is the
redistribution (engine package docstring), which the reduction does once over the parts' sums:

- `spread` idle: per (pool, day) each job's gross GPU units on the pool's nodes, and per (pool,
  day, ledger group) the idle to spread, are integer sums, so the parts' sums add up to the
  month's; the idle rows stay aside (pending) until the reduction knows whether the pool-day has
  jobs with GPU cost (else they are kept as they were).
- shared-cost lines: their day shares stay aside until the reduction knows every team's spend.

Every sum is of integers (money in 10^-12 units) or of GPU-seconds of one node (one part), so the
merged ledger equals the unsplit one to the last stored decimal, whatever the number of parts
(tests/test_attribution_split.py). No ORM here: the services load and write.

PartResult.dumps / loads carry a part between processes (a Celery result): marshal (plain
ints, strings, tuples, dicts, no code), compressed.
"""

from __future__ import annotations

import datetime as dt
import marshal
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any

from finops.attribution import engine
from finops.attribution.engine.redistribute import pool_idle_split, shared_weights
from finops.attribution.engine.units import ZERO, split_units
from finops.attribution.engine.values import GPU_CATEGORIES
from finops.attribution.inputs import Dims, Inputs, JobMeta
from finops.attribution.ledger import Bill, Ledger, LedgerKey, finish

# (pool, day)
PoolDay = tuple[str, int]
# A shared-cost line's day share waiting for the teams' spend: (ledger key as unallocated,
# [units, list units, contracted units], (method, fixed weights), provider, currency).
SharedPending = tuple[LedgerKey, list[int], tuple[str, tuple[tuple[int, int], ...]], str, str]


@dataclass(slots=True)
class PartResult:
    """What one part contributes to its month. Ledger keys index dims (the part's own list)."""

    dims: list[Dims] = field(default_factory=list)
    ledger: Ledger = field(default_factory=dict)
    # (pool, day) -> job id -> gross GPU units on the pool's nodes; job id -> team id.
    spread_weights: dict[PoolDay, dict[int, int]] = field(default_factory=dict)
    job_team: dict[int, int | None] = field(default_factory=dict)
    # (pool, day, dims index) -> [idle units, list units, contracted units] to spread.
    pooled: dict[tuple[str, int, int], list[int]] = field(default_factory=dict)
    # The same idle as ledger rows, kept when the pool-day has no job with GPU cost.
    pending: dict[PoolDay, Ledger] = field(default_factory=dict)
    shared: list[SharedPending] = field(default_factory=list)
    bill: Bill = field(default_factory=dict)
    job_meta: dict[int, JobMeta] = field(default_factory=dict)
    nodes: set[str] = field(default_factory=set)
    line_items: int = 0
    # Line items read per import batch, and the month's jobs (a part loads only those that ran
    # on its nodes: Inputs.month_jobs).
    batches: dict[int, int] = field(default_factory=dict)
    jobs: int = 0

    def dumps(self) -> bytes:
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["ledger"] = _ledger_out(self.ledger)
        state["pending"] = {k: _ledger_out(v) for k, v in self.pending.items()}
        state["job_meta"] = {
            k: (m.cluster, m.run_id, m.state, m.start.isoformat(),
                None if m.end is None else m.end.isoformat(), m.endpoint, m.job_id)
            for k, m in self.job_meta.items()
        }  # fmt: skip
        return zlib.compress(marshal.dumps(state), 1)

    @classmethod
    def loads(cls, data: bytes) -> PartResult:
        state: dict[str, Any] = marshal.loads(zlib.decompress(data))
        state["ledger"] = _ledger_in(state["ledger"])
        state["pending"] = {k: _ledger_in(v) for k, v in state["pending"].items()}
        state["job_meta"] = {
            k: JobMeta(c, r, s, dt.datetime.fromisoformat(a),
                       None if b is None else dt.datetime.fromisoformat(b), e, j)
            for k, (c, r, s, a, b, e, j) in state["job_meta"].items()
        }  # fmt: skip
        return cls(**state)


def _ledger_out(ledger: Ledger) -> dict[LedgerKey, list[Any]]:
    return {k: [v[0], str(v[1]), v[2], v[3]] for k, v in ledger.items()}


def _ledger_in(ledger: dict[LedgerKey, list[Any]]) -> Ledger:
    return {k: [v[0], Decimal(v[1]), v[2], v[3]] for k, v in ledger.items()}


def part_result(inputs: Inputs, shares: list[engine.Share]) -> PartResult:
    """A part's first-pass shares summed: ledger rows, and what the redistribution needs."""
    lines = inputs.lines
    spread = {
        line.id: (line.spread_pool, line.group)
        for line in lines
        if line.spread_pool is not None and (line.node is not None or line.category == engine.IDLE)
    }
    node_pool = {
        line.node: line.spread_pool for line in lines if line.id in spread and line.node is not None
    }
    shared_lines = {
        line.id: line
        for line in lines
        if line.shared is not None and line.node is None and line.category == engine.UNALLOCATED
    }
    part = PartResult(dims=inputs.dims, line_items=len(lines), bill=_bill(inputs))
    part.jobs = inputs.month_jobs
    for line in lines:
        batch_id = int(inputs.dims[inputs.line_dims[line.id]][6])
        part.batches[batch_id] = part.batches.get(batch_id, 0) + 1
    part.nodes = {line.node for line in lines if line.node is not None}
    line_dims = inputs.line_dims
    ledger = part.ledger
    for share in shares:
        key = (
            line_dims[share.line_id], share.day, share.category, share.team_id, share.job_id,
            share.node,
        )  # fmt: skip
        category = share.category
        if share.job_id is not None and category in GPU_CATEGORIES:
            pool = node_pool.get(share.node)
            if pool is not None:
                per_job = part.spread_weights.setdefault((pool, share.day), {})
                per_job[share.job_id] = per_job.get(share.job_id, 0) + abs(share.units)
                part.job_team[share.job_id] = share.team_id
        elif category == engine.IDLE and share.job_id is None and share.line_id in spread:
            pool, group = spread[share.line_id]
            assert pool is not None
            acc = part.pooled.setdefault((pool, share.day, group), [0, 0, 0])
            acc[0] += share.units
            acc[1] += share.list_units
            acc[2] += share.contracted_units
            _add(part.pending.setdefault((pool, share.day), {}), key, share)
            continue
        elif category == engine.UNALLOCATED and share.line_id in shared_lines:
            line = shared_lines[share.line_id]
            assert line.shared is not None
            rule = (line.shared.method, line.shared.fixed)
            values = [share.units, share.list_units, share.contracted_units]
            part.shared.append((key, values, rule, line.provider, line.currency))
            continue
        _add(ledger, key, share)
    part.ledger = finish(ledger)
    part.pending = {k: finish(v) for k, v in part.pending.items()}
    jobs = {key[4] for key in part.ledger if key[4] is not None} | set(part.job_team)
    part.job_meta = {j: inputs.job_meta[j] for j in jobs}
    return part


def _add(ledger: Ledger, key: LedgerKey, share: engine.Share) -> None:
    acc = ledger.get(key)
    if acc is None:
        ledger[key] = [share.units, share.gpu_seconds, share.list_units, share.contracted_units]
        return
    acc[0] += share.units
    if share.gpu_seconds:
        acc[1] += share.gpu_seconds
    acc[2] += share.list_units
    acc[3] += share.contracted_units


def _bill(inputs: Inputs) -> Bill:
    """The part's line items summed per provider, account, currency and column."""
    bill: Bill = {}
    to_units = engine.decimal_to_units
    for line in inputs.lines:
        dims = inputs.dims[inputs.line_dims[line.id]]
        for column, amount in enumerate((line.cost, line.list_cost, line.contracted_cost)):
            key = (dims[0], dims[1], dims[5], column)
            bill[key] = bill.get(key, 0) + to_units(amount)
    return bill


class PartOverlapError(RuntimeError):
    """Two parts billed the same node (a node billed under two resources cut apart by the
    plan): the split would count its GPU-seconds twice. Attribute the month in one part."""


@dataclass(slots=True)
class MonthLedger:
    """The reduction's result: the month's ledger, its dims and job meta, and its bill."""

    dims: list[Dims]
    ledger: Ledger
    job_meta: dict[int, JobMeta]
    bill: Bill
    line_items: int
    jobs: int
    batches: dict[int, int]


def month_ledger_reduce(parts: Iterable[PartResult]) -> MonthLedger:
    """Merge the parts, then spread pooled idle and split shared-cost lines (module docstring).
    The parts are read one at a time: given a generator, each is freed once merged."""
    dims_index: dict[Dims, int] = {}
    ledger: Ledger = {}
    weights: dict[PoolDay, dict[int, int]] = {}
    job_team: dict[int, int | None] = {}
    pooled: dict[tuple[str, int, int], list[int]] = {}
    pending: dict[PoolDay, Ledger] = {}
    shared: list[SharedPending] = []
    result = MonthLedger([], ledger, {}, {}, 0, 0, {})
    seen_nodes: set[str] = set()
    for part in parts:
        if seen_nodes & part.nodes:
            raise PartOverlapError(f"nodes in two parts: {sorted(seen_nodes & part.nodes)[:5]}")
        seen_nodes |= part.nodes
        remap = [dims_index.setdefault(d, len(dims_index)) for d in part.dims]
        _merge(ledger, part.ledger, remap)
        for pool_day, rows in part.pending.items():
            _merge(pending.setdefault(pool_day, {}), rows, remap)
        for pool_day, per_job in part.spread_weights.items():
            merged = weights.setdefault(pool_day, {})
            for job_id, units in per_job.items():
                merged[job_id] = merged.get(job_id, 0) + units
        job_team.update(part.job_team)
        for (pool, day, group), values in part.pooled.items():
            acc = pooled.setdefault((pool, day, remap[group]), [0, 0, 0])
            for i in range(3):
                acc[i] += values[i]
        shared.extend(((remap[k[0]], *k[1:]), v, r, p, c) for k, v, r, p, c in part.shared)
        for key, units in part.bill.items():
            result.bill[key] = result.bill.get(key, 0) + units
        result.job_meta.update(part.job_meta)
        result.line_items += part.line_items
        result.jobs = max(result.jobs, part.jobs)
        for batch_id, n in part.batches.items():
            result.batches[batch_id] = result.batches.get(batch_id, 0) + n
    result.dims = list(dims_index)
    _spread(ledger, weights, job_team, pooled, pending)
    _split_shared(ledger, shared, result.dims)
    result.ledger = finish(ledger)
    return result


def _merge(into: Ledger, rows: Ledger, remap: list[int] | None) -> None:
    """Add rows into a ledger, their dims indexes mapped through remap (None: as they are)."""
    for row_key, values in rows.items():
        key = row_key if remap is None else (remap[row_key[0]], *row_key[1:])
        acc = into.get(key)
        if acc is None:
            into[key] = list(values)
        else:
            for i in range(4):
                acc[i] += values[i]


def _spread(
    ledger: Ledger,
    weights: dict[PoolDay, dict[int, int]],
    job_team: dict[int, int | None],
    pooled: dict[tuple[str, int, int], list[int]],
    pending: dict[PoolDay, Ledger],
) -> None:
    """Spread idle of live pool-days to their jobs (engine.redistribute.spread_idle, on sums);
    the others keep their idle rows."""
    live = {pool_day for pool_day, per_job in weights.items() if any(per_job.values())}
    for (pool, day, group), (units, list_units, contracted_units) in pooled.items():
        if (pool, day) not in live:
            continue
        columns = pool_idle_split(units, list_units, contracted_units, weights[(pool, day)])
        for job_id, part, list_part, contracted_part in columns:
            key = (group, day, engine.IDLE, job_team[job_id], job_id, "")
            _add_values(ledger, key, [part, ZERO, list_part, contracted_part])
    for pool_day, rows in pending.items():
        if pool_day not in live:
            _merge(ledger, rows, None)


def _add_values(ledger: Ledger, key: LedgerKey, values: list[Any]) -> None:
    acc = ledger.get(key)
    if acc is None:
        ledger[key] = values
    else:
        for i in range(4):
            acc[i] += values[i]


def _split_shared(ledger: Ledger, shared: list[SharedPending], dims: list[Dims]) -> None:
    """Shared-cost day shares to teams (engine.redistribute.split_shared, on sums)."""
    if not shared:
        return
    spend: dict[int, int] = {}
    gpu: dict[tuple[str, str], dict[int, int]] = {}
    direct = (engine.TRAINING, engine.INFERENCE, engine.TAGGED)
    for (group, _, category, team_id, _, _), values in ledger.items():
        if team_id is None or category not in direct:
            continue
        spend[team_id] = spend.get(team_id, 0) + values[0]
        if category != engine.TAGGED:
            provider, currency = dims[group][0], dims[group][5]
            for scope in ((provider, currency), ("", currency)):
                per_team = gpu.setdefault(scope, {})
                per_team[team_id] = per_team.get(team_id, 0) + values[0]
    memo: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
    for key, (units, list_units, contracted_units), (method, fixed), provider, currency in shared:
        memo_key = (method, fixed, provider, currency)
        if memo_key not in memo:
            line = engine.LineItem(
                0, 0, 0, ZERO, shared=engine.SharedRule(method, fixed),
                provider=provider, currency=currency,
            )  # fmt: skip
            memo[memo_key] = shared_weights(line, spend, gpu)
        teams, team_weights = memo[memo_key]
        if not teams:
            _add_values(ledger, key, [units, ZERO, list_units, contracted_units])
            continue
        cost_parts = split_units(units, team_weights)
        columns = zip(
            teams,
            cost_parts,
            split_units(list_units - units, team_weights, cost_parts),
            split_units(contracted_units - units, team_weights, cost_parts),
            strict=True,
        )
        group, day = key[0], key[1]
        for team_id, part, list_part, contracted_part in columns:
            if part or list_part or contracted_part:
                row = (group, day, engine.SHARED, team_id, None, "")
                _add_values(ledger, row, [part, ZERO, list_part, contracted_part])
