"""After the first split: idle of `spread` pools to the jobs of the pool and day, and shared-cost
lines to teams (see the package docstring for both)."""

from __future__ import annotations

from collections.abc import Sequence

from finops.attribution.engine.units import ZERO, split_units
from finops.attribution.engine.values import (
    EVEN,
    FIXED,
    GPU_CATEGORIES,
    GPU_SPEND,
    IDLE,
    INFERENCE,
    SHARED,
    TAGGED,
    TRAINING,
    UNALLOCATED,
    LineItem,
    Share,
    SharedRule,
)


def spread_idle(ordered: Sequence[LineItem], shares: list[Share]) -> list[Share]:
    """Idle of `spread` node lines to the jobs of their pool and day (module docstring)."""
    # Node lines of a spread pool, and idle lines without a node tied to one (unused
    # commitments: the service books them as idle of the pool that used the commitment).
    spread = {
        line.id: (line.spread_pool, line.group)
        for line in ordered
        if line.spread_pool is not None and (line.node is not None or line.category == IDLE)
    }
    if not spread:
        return shares
    node_pool = {
        line.node: line.spread_pool
        for line in ordered
        if line.id in spread and line.node is not None
    }
    # (pool, day) -> job id -> gross GPU (training, inference) units on the pool's nodes that day.
    weights: dict[tuple[str, int], dict[int, int]] = {}
    job_team: dict[int, int | None] = {}
    for share in shares:
        if share.category in GPU_CATEGORIES and share.node in node_pool:
            pool = node_pool[share.node]
            assert pool is not None and share.job_id is not None
            per_job = weights.setdefault((pool, share.day), {})
            per_job[share.job_id] = per_job.get(share.job_id, 0) + abs(share.units)
            job_team[share.job_id] = share.team_id
    # (pool, day, group) -> [signed idle units, list units, contracted units, first line id]
    pooled: dict[tuple[str, int, int], list[int]] = {}
    kept: list[Share] = []
    # Pool-days whose jobs have some GPU cost; the others keep their idle (keep rules).
    live = {key for key, per_job in weights.items() if any(per_job.values())}
    for share in shares:
        meta = spread.get(share.line_id) if share.category == IDLE else None
        if meta is not None and share.job_id is None:
            pool, group = meta
            assert pool is not None
            if (pool, share.day) in live:
                acc = pooled.setdefault((pool, share.day, group), [0, 0, 0, share.line_id])
                acc[0] += share.units
                acc[1] += share.list_units
                acc[2] += share.contracted_units
                continue
        kept.append(share)
    for (pool, day, _), (units, list_units, contracted_units, line_id) in pooled.items():
        columns = pool_idle_split(units, list_units, contracted_units, weights[(pool, day)])
        for job_id, part, list_part, contracted_part in columns:
            if part or list_part or contracted_part:
                kept.append(
                    Share(
                        line_id, day, IDLE, job_team[job_id], job_id, "", part, ZERO, list_part,
                        contracted_part,
                    )
                )  # fmt: skip
    return kept


def split_shared(ordered: Sequence[LineItem], shares: list[Share]) -> list[Share]:
    """Unallocated lines with a shared-cost rule to teams, category `shared`."""
    rules = {
        line.id: line
        for line in ordered
        if line.shared is not None and line.node is None and line.category == UNALLOCATED
    }
    if not rules:
        return shares
    spend, gpu = _team_spend(ordered, shares)
    memo: dict[tuple[SharedRule, str, str], tuple[list[int], list[int]]] = {}
    result: list[Share] = []
    for share in shares:
        line = rules.get(share.line_id) if share.category == UNALLOCATED else None
        if line is None:
            result.append(share)
            continue
        assert line.shared is not None
        memo_key = (line.shared, line.provider, line.currency)
        if memo_key not in memo:
            memo[memo_key] = shared_weights(line, spend, gpu)
        teams, weights = memo[memo_key]
        if not teams:
            result.append(share)  # nobody to share with: stays unallocated
            continue
        cost_parts = split_units(share.units, weights)
        columns = zip(
            teams,
            cost_parts,
            split_units(share.list_units - share.units, weights, cost_parts),
            split_units(share.contracted_units - share.units, weights, cost_parts),
            strict=True,
        )
        for team_id, part, list_part, contracted_part in columns:
            if part or list_part or contracted_part:
                result.append(
                    Share(
                        share.line_id, share.day, SHARED, team_id, None, "", part, ZERO,
                        list_part, contracted_part,
                    )
                )  # fmt: skip
    return result


# (provider, currency) -> team -> net training + inference units; ("", currency) for any provider.
_GpuSpend = dict[tuple[str, str], dict[int, int]]


def _team_spend(
    ordered: Sequence[LineItem], shares: list[Share]
) -> tuple[dict[int, int], _GpuSpend]:
    """Net direct spend per team (training, inference, tagged), and GPU spend per scope."""
    scope = {line.id: (line.provider, line.currency) for line in ordered}
    spend: dict[int, int] = {}
    gpu: _GpuSpend = {}
    for share in shares:
        team_id = share.team_id
        if team_id is None or share.category not in (TRAINING, INFERENCE, TAGGED):
            continue
        spend[team_id] = spend.get(team_id, 0) + share.units
        if share.category != TAGGED:
            provider, currency = scope[share.line_id]
            for key in ((provider, currency), ("", currency)):
                per_team = gpu.setdefault(key, {})
                per_team[team_id] = per_team.get(team_id, 0) + share.units
    return spend, gpu


def shared_weights(
    line: LineItem, spend: dict[int, int], gpu: _GpuSpend
) -> tuple[list[int], list[int]]:
    """Teams (sorted by id, for deterministic ties) and integer weights; ([], []) for none."""
    rule = line.shared
    assert rule is not None
    if rule.method == FIXED:
        merged: dict[int, int] = {}
        for team_id, weight in rule.fixed:
            merged[team_id] = merged.get(team_id, 0) + max(weight, 0)
        chosen = {t: w for t, w in merged.items() if w > 0}
    elif rule.method == EVEN:
        chosen = {t: 1 for t, units in spend.items() if units > 0}
    elif rule.method == GPU_SPEND:
        chosen = {}
        for key in ((line.provider, line.currency), ("", line.currency)):
            chosen = {t: units for t, units in gpu.get(key, {}).items() if units > 0}
            if chosen:
                break
    else:
        raise ValueError(f"unknown shared-cost method {rule.method!r}")
    teams = sorted(chosen)
    return teams, [chosen[t] for t in teams]


def pool_idle_split(
    units: int, list_units: int, contracted_units: int, per_job: dict[int, int]
) -> list[tuple[int, int, int, int]]:
    """A pool-day's idle (cost, on-demand and contracted units) split over its jobs by their
    weights, in job id order: (job id, cost, list, contracted). The list and contracted parts
    are split as their excess over cost, so each job's parts keep the line's own proportions
    (shared by the one-process path and the reduce of a month split in parts)."""
    job_ids = sorted(per_job)
    job_weights = [per_job[j] for j in job_ids]
    cost_parts = split_units(units, job_weights)
    return list(
        zip(
            job_ids,
            cost_parts,
            split_units(list_units - units, job_weights, cost_parts),
            split_units(contracted_units - units, job_weights, cost_parts),
            strict=True,
        )
    )
