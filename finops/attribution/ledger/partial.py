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
(tests/attribution/test_attribution_split.py). No ORM here: the services load and write.

On PostgreSQL a part also writes the rows nothing else can change (stage_pick: those of its own
nodes) into a staging table and sends only their sums (PartResult.staged, staged.py), so the
reduction merges and holds the remaining rows alone (spread idle, rows without a node).

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

import numpy as np
import numpy.typing as npt
from django.conf import settings

from finops.attribution import engine
from finops.attribution.engine.redistribute import pool_idle_split, shared_weights
from finops.attribution.engine.units import ZERO, split_units
from finops.attribution.engine.vector import allocate_lines_vector
from finops.attribution.inputs.charge_rollups import ChargeSums
from finops.attribution.inputs.month import Dims, Inputs, JobMeta
from finops.attribution.ledger.rollup_sums import Bill, Ledger, LedgerKey
from finops.attribution.ledger.staged import GpuSpend, Staged
from finops.attribution.ledger.writer import finish

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
    # The rows the part wrote itself and their sums (staged.py); None: it wrote nothing.
    staged: Staged | None = None

    def dumps(self) -> bytes:
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        state["ledger"] = _ledger_out(self.ledger)
        state["pending"] = {k: _ledger_out(v) for k, v in self.pending.items()}
        state["job_meta"] = {
            k: (m.cluster, m.run_id, m.state, m.start.isoformat(),
                None if m.end is None else m.end.isoformat(), m.endpoint, m.job_id, m.service)
            for k, m in self.job_meta.items()
        }  # fmt: skip
        state["staged"] = None if self.staged is None else self.staged.state()
        return zlib.compress(marshal.dumps(state), 1)

    @classmethod
    def loads(cls, data: bytes) -> PartResult:
        state: dict[str, Any] = marshal.loads(zlib.decompress(data))
        state["ledger"] = _ledger_in(state["ledger"])
        state["pending"] = {k: _ledger_in(v) for k, v in state["pending"].items()}
        state["job_meta"] = {
            k: JobMeta(c, r, s, dt.datetime.fromisoformat(a),
                       None if b is None else dt.datetime.fromisoformat(b), e, j, v)
            for k, (c, r, s, a, b, e, j, v) in state["job_meta"].items()
        }  # fmt: skip
        if state["staged"] is not None:
            state["staged"] = Staged.from_state(state["staged"])
        return cls(**state)


def _ledger_out(ledger: Ledger) -> dict[LedgerKey, list[Any]]:
    return {k: [v[0], str(v[1]), v[2], v[3]] for k, v in ledger.items()}


def _ledger_in(ledger: dict[LedgerKey, list[Any]]) -> Ledger:
    return {k: [v[0], Decimal(v[1]), v[2], v[3]] for k, v in ledger.items()}


def part_first_pass(inputs: Inputs, *, engine_name: str | None = None) -> PartResult:
    """A part's first pass (engine.allocate_lines_into), its shares summed as they are made;
    engine_name "vector" (default: settings.FINOPS_ATTRIBUTION_ENGINE) splits the GPU node
    lines on columns into the same fold (engine/vector.py)."""
    if engine_name is None:
        engine_name = settings.FINOPS_ATTRIBUTION_ENGINE
    fold = engine.ShareFold(inputs.lines)
    if engine_name == "vector":
        allocate_lines_vector(
            inputs.lines, inputs.jobs, fold, horizon=inputs.horizon, block=inputs.block
        )
    else:
        assert not len(inputs.block), "line items read as columns need the vectorised engine"
        engine.allocate_lines_into(inputs.lines, inputs.jobs, fold, horizon=inputs.horizon)
    return part_of_fold(inputs, fold)


def part_of_fold(inputs: Inputs, fold: engine.ShareFold) -> PartResult:
    """The part's result from its folded first pass (and its line items' sums)."""
    part = PartResult(dims=inputs.dims, line_items=len(inputs.lines) + len(inputs.block))
    part.jobs = inputs.month_jobs
    _line_sums(inputs, part)
    part.spread_weights, part.job_team, part.pooled = (
        fold.spread_weights,
        fold.job_team,
        fold.pooled,
    )
    part.shared = fold.shared
    part.ledger = finish(fold.ledger)
    part.pending = {k: finish(v) for k, v in fold.pending.items()}
    jobs = {key[4] for key in part.ledger if key[4] is not None} | set(part.job_team)
    part.job_meta = {j: inputs.job_meta[j] for j in jobs}
    return part


def _line_sums(inputs: Inputs, part: PartResult) -> None:
    """The part's line items summed per provider, account, currency and column (its bill),
    counted per import batch, and its nodes."""
    bill = part.bill
    units: dict[Decimal, int] = {}  # amounts repeat hour after hour: converted once each
    to_units = engine.decimal_to_units
    line_dims, batches = inputs.line_dims, part.batches
    # Per ledger group: its batch and its bill keys, one per column.
    groups = [(int(d[6]), [(d[0], d[1], d[5], column) for column in range(3)]) for d in inputs.dims]
    for line in inputs.lines:
        batch_id, keys = groups[line_dims[line.id]]
        batches[batch_id] = batches.get(batch_id, 0) + 1
        amounts = (line.cost, line.list_cost, line.contracted_cost)
        for key, amount in zip(keys, amounts, strict=True):
            value = units.get(amount)
            if value is None:
                value = units[amount] = to_units(amount)
            bill[key] = bill.get(key, 0) + value
    _block_sums(inputs, part, groups)
    part.nodes = {line.node for line in inputs.lines if line.node is not None}
    block = inputs.block
    if len(block):
        used = np.unique(block.template).tolist()
        part.nodes |= {n for t in used if (n := block.templates[t].node) is not None}


def _block_sums(
    inputs: Inputs, part: PartResult, groups: list[tuple[int, list[tuple[Any, ...]]]]
) -> None:
    """_line_sums of the lines read as columns: integer sums per ledger group."""
    block = inputs.block
    if not len(block):
        return
    size = len(groups)
    counts = np.bincount(block.group, minlength=size).tolist()
    # The lines by group once, each column summed per run of a group.
    order = np.argsort(block.group, kind="stable")
    starts = np.searchsorted(block.group[order], np.arange(size))
    ends = np.r_[starts[1:], len(order)]
    bounds = list(zip(starts.tolist(), ends.tolist(), strict=True))
    sums = [
        _group_sums(column[order], bounds)
        for column in (block.cost, block.list_cost, block.contracted)
    ]
    bill, batches = part.bill, part.batches
    for group, (batch_id, keys) in enumerate(groups):
        if not counts[group]:
            continue
        batches[batch_id] = batches.get(batch_id, 0) + counts[group]
        for key, column in zip(keys, sums, strict=True):
            bill[key] = bill.get(key, 0) + column[group]


def _group_sums(ordered: npt.NDArray[np.int64], bounds: list[tuple[int, int]]) -> list[int]:
    """Exact integer sums of values in group order per [start, end) of a group (Python
    integers: a month's sum may pass int64)."""
    return [sum(ordered[a:b].astype(object).tolist()) if b > a else 0 for a, b in bounds]


class PartOverlapError(RuntimeError):
    """Two parts billed the same node (a node billed under two resources cut apart by the
    plan): the split would count its GPU-seconds twice. Attribute the month in one part."""


def stage_pick(part: PartResult) -> Ledger:
    """Take out of the part's ledger the rows that nothing else can change, for the part to
    write itself (staged.py): rows of one of its nodes (a node's lines are all in one part,
    PartOverlapError), unless the same key is among its pending idle (the reduction adds those
    back when their pool-day has no job to spread onto). The reduction's own rows (spread idle,
    shared costs) and rows of lines without a node (their keys may meet another part's) have
    node "" and stay. The part keeps only the job meta the remaining rows and the spread need."""
    pending = {key for rows in part.pending.values() for key in rows}
    staged: Ledger = {}
    kept: Ledger = {}
    for key, values in part.ledger.items():
        if key[5] and key not in pending:
            staged[key] = values
        else:
            kept[key] = values
    part.ledger = kept
    jobs = {key[4] for key in kept if key[4] is not None} | set(part.job_team)
    part.job_meta = {j: meta for j, meta in part.job_meta.items() if j in jobs}
    return staged


def direct_spend(ledger: Ledger, dims: list[Dims], spend: dict[int, int], gpu: GpuSpend) -> None:
    """Add each team's direct spend (training, inference, tagged) and its GPU spend per
    (provider, currency) and ("", currency) in the ledger: what shared costs are split by."""
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


@dataclass(slots=True)
class MonthLedger:
    """The reduction's result: the month's ledger (less the rows the parts staged), its dims
    and job meta, its bill, and the parts' staged rows' sums."""

    dims: list[Dims]
    ledger: Ledger
    job_meta: dict[int, JobMeta]
    bill: Bill
    line_items: int
    jobs: int
    batches: dict[int, int]
    staged: Staged = field(default_factory=Staged)
    # The month's fresh table, holding the staged rows already (stage_copy.py); None: the
    # write makes it and copies them.
    fresh: str | None = None


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
    result = MonthLedger([], ledger, {}, {}, 0, 0, {}, Staged(charges=ChargeSums()))
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
        result.staged.merge(part.staged)
    result.dims = list(dims_index)
    _spread(ledger, weights, job_team, pooled, pending)
    _split_shared(ledger, shared, result.dims, result.staged)
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


def _split_shared(
    ledger: Ledger, shared: list[SharedPending], dims: list[Dims], staged: Staged
) -> None:
    """Shared-cost day shares to teams (engine.redistribute.split_shared, on sums): the teams'
    spend is that of the ledger's rows and of the rows the parts staged."""
    if not shared:
        return
    spend = dict(staged.spend)
    gpu = {scope: dict(per_team) for scope, per_team in staged.gpu.items()}
    direct_spend(ledger, dims, spend, gpu)
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
