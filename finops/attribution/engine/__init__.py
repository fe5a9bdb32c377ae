"""The attribution engine (DESIGN section 5): pure Python, no ORM, exact to the last stored decimal.

Dataclasses in, shares out. The service loads LineItem / Job values from the database
(attribution/inputs/month.py), runs `allocate_lines`, and aggregates the shares into the ledger
(attribution/ledger/writer.py). The package, by stage: values.py (what goes in and out), units.py
(exact money and largest remainder), nodes.py (resources to nodes, jobs by node and hour),
node_lines.py (a GPU node line into job shares and idle), redistribute.py (spread idle, shared
costs).

How one GPU node line item is split (requested-GPU basis, idle policy `keep`):

- Its EffectiveCost C is spread evenly over its charge period [start, end) of T seconds and
  bucketed by UTC hour; a bucket is hour ∩ charge period (length L, partial hours allowed), so
  the bucket's cost is C x L / T.
- A job holds gpus / len(nodes) GPUs on each of its nodes; its GPU-seconds in a bucket are that
  times the seconds its [start, end) overlaps the bucket. A running job (end None) runs to the
  end of the charge period: cost to date.
- Job share = bucket cost x job GPU-seconds / (node GPUs x L). The rest of the bucket is idle.
  When the jobs hold more than the node has (oversubscription, bad GPU counts), the whole bucket
  is split pro rata among them and idle is 0.
- A job's shares carry its Job.category: `training`, or `inference` for a pod that serves an
  inference endpoint (the service decides); both are GPU spend.

Charge basis (DESIGN section 5.3) is decided by the service: on a `used` cluster a job with a
measured utilisation u = p/q arrives with gpu_micros x p and gpu_denominator x q, so the engine
charges GPUs x u and what the job requested but did not use falls into idle by itself; Share
gpu_seconds are then the charged (used) GPU-seconds. Job.requested_gpus keeps the requested
GPUs only to size nodes of unknown type (JobIndex.fallback_capacity).

Idle policies (DESIGN section 5.4). The service resolves `keep` and `platform` into the owner
team of a node line's idle (LineItem.team_id); the engine only has to do `spread`: the idle of
every node line with a spread_pool is pooled per (pool, UTC day, ledger group) and split among
the jobs that have GPU cost (training or inference) on that pool's nodes that day, pro rata to
that cost (gross: credits count by magnitude, so a weight is never negative). The rows keep
category `idle` but carry the receiving job's team and job id (and node ""), so a team's bill
shows how much of it was idle. A pool-day whose jobs have no GPU cost (no jobs, or only
zero-cost hours) keeps its idle under `keep` rules: there is nobody to spread it onto.
A line without a node whose category is `idle` (unused commitment cost, issue 13) is idle of
the team the service chose; with a spread_pool it is pooled with that pool's idle the same way.

Shared costs (DESIGN section 5.5). An unallocated non-node line with a SharedRule is split among
teams as category `shared`: `even` among the teams with positive direct spend (training,
inference, tagged) in the month; `gpu_spend` pro rata to positive training + inference cost of
the month on the same provider and currency, else on any provider in that currency; `fixed` by
the rule's weights. No teams (or all weights 0): the line stays `unallocated`.

Exactness: all weights are integers (seconds, millionths of a GPU), so every share is the exact
rational U x N_k / D of the line's amount in MONEY_QUANTUM units U. The largest-remainder method
then rounds them to whole units that sum to U exactly: per line item, sum(shares) == EffectiveCost.
Spread idle is the one exception to "per line item": it is rounded per (pool, day, ledger group),
whose total is an exact sum of per-line idle parts, and booked on the group's first line id; so
every sum over the ledger's dimensions (provider, account, currency, ...) stays exact.
Credits (negative costs) are split by magnitude and get the sign back. Decimal appears only at the
edges (amount in, gpu-seconds out).

ListCost and ContractedCost (issue 13) ride along in the same pass: every split above applies the
same integer weights to each column; a column's parts are the cost parts plus the
largest-remainder split of (column - cost), so each column conserves per line item exactly as
EffectiveCost does (spread idle and shared lines likewise, per pool-day-group and per line), and a
share's list part is >= its cost part whenever its line's ListCost is >= its EffectiveCost. The
weights stay those of EffectiveCost: a job's share of a node hour is what it held, whatever the
hour was bought at.
"""

from __future__ import annotations

from collections.abc import Iterable

from finops.attribution.engine.fold import ShareFold, fold_shares
from finops.attribution.engine.node_lines import split_node_line, spread_by_day
from finops.attribution.engine.nodes import JobIndex, match_node, node_name_map
from finops.attribution.engine.redistribute import split_shared, spread_idle
from finops.attribution.engine.units import (
    GPU_SCALE,
    MONEY_PLACES,
    GpuSeconds,
    decimal_to_units,
    gpu_micros,
    largest_remainder,
    units_to_decimal,
)
from finops.attribution.engine.values import (
    DAY,
    EVEN,
    FIXED,
    GPU_SPEND,
    HOUR,
    IDLE,
    INFERENCE,
    NODE_TAG_KEYS,
    SHARED,
    TAGGED,
    TRAINING,
    UNALLOCATED,
    Job,
    LineItem,
    Share,
    SharedRule,
)

__all__ = [
    "DAY", "EVEN", "FIXED", "GPU_SCALE", "GPU_SPEND", "HOUR", "IDLE", "INFERENCE",
    "MONEY_PLACES", "NODE_TAG_KEYS", "SHARED", "TAGGED", "TRAINING", "UNALLOCATED", "Job",
    "JobIndex", "LineItem", "Share", "ShareFold", "SharedRule", "allocate", "allocate_lines",
    "allocate_lines_into", "decimal_to_units", "fold_shares", "gpu_micros", "largest_remainder",
    "match_node", "node_name_map", "units_to_decimal",
]  # fmt: skip


def allocate(lines: Iterable[LineItem], jobs: Iterable[Job]) -> list[Share]:
    """Split every line item into shares that sum exactly to its cost: the first pass
    (allocate_lines), then idle of `spread` pools and shared-cost lines redistributed."""
    ordered = sorted(lines, key=lambda line: line.id)
    shares = allocate_lines(ordered, jobs)
    shares = spread_idle(ordered, shares)
    return split_shared(ordered, shares)


def allocate_lines(
    lines: Iterable[LineItem], jobs: Iterable[Job], *, horizon: int | None = None
) -> list[Share]:
    """The first pass alone: each line item into job shares, idle and its owner's shares, per
    line and independent of every other line except those of the same node (which share the
    node's GPU-second buckets). So a month's lines can be split into parts by node, each part
    allocated on its own, and the redistribution done once over the parts' sums
    (attribution/ledger/partial.py). horizon: where running jobs end (the month's latest charge
    period end; by default that of these lines)."""
    shares: list[Share] = []
    allocate_lines_into(lines, jobs, shares, horizon=horizon)
    return shares


def allocate_lines_into(
    lines: Iterable[LineItem],
    jobs: Iterable[Job],
    out: list[Share] | ShareFold,
    *,
    horizon: int | None = None,
) -> None:
    """allocate_lines, its shares appended to out: a list, or a ShareFold that sums them into
    ledger rows as they are made (what a month's attribution keeps of them)."""
    ordered = sorted(lines, key=lambda line: line.id)
    nodes = {line.node for line in ordered if line.node is not None}
    if horizon is None:
        horizon = max((line.end for line in ordered), default=0)
    index = JobIndex(jobs, nodes=nodes, horizon=horizon)
    counted: set[tuple[str, int, int]] = set()
    seconds = GpuSeconds()
    fold = out if isinstance(out, ShareFold) else None
    for line in ordered:
        if fold is not None:
            fold.begin(line)
        if line.node is None:
            spread_by_day(line, line.category, line.team_id, "", out)
        else:
            split_node_line(line, index, counted, seconds, out)
