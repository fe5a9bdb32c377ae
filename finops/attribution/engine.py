"""The attribution engine (DESIGN section 5): pure Python, no ORM, exact to the last stored decimal.

Dataclasses in, shares out. The service loads LineItem / Job values from the database, runs
`attribute`, aggregates the shares into the ledger.

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

import functools
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from typing import NamedTuple

# Must equal billing_ingest.models.MONEY_PLACES (a test checks it); repeated here so the engine
# stays importable without Django.
MONEY_PLACES = 12
# JobRecord.gpus has 6 decimals: job GPUs are carried as integer millionths of a GPU.
GPU_SCALE = 10**6
HOUR = 3600
DAY = 86400

# Category values (must equal finops.attribution.models.Category; a test checks it).
TRAINING = "training"
TAGGED = "tagged"
IDLE = "idle"
SHARED = "shared"
INFERENCE = "inference"
UNALLOCATED = "unallocated"

# Shared-cost methods (must equal finops.attribution.models.SharedCostRule.Method).
EVEN = "even"
GPU_SPEND = "gpu_spend"
FIXED = "fixed"

# Categories of job shares of GPU nodes (Job.category).
_GPU_CATEGORIES = frozenset({TRAINING, INFERENCE})

# Node-name tags on billed resources (DESIGN section 5.1), tried in this order.
NODE_TAG_KEYS = ("finops:node", "kubernetes.io/hostname", "slurm:node", "Name")

# High precision for the only divisions done in Decimal (gpu-seconds): far below the 6 stored
# decimals, so the quantisation at write time is the only rounding that shows.
_CTX = Context(prec=50)
_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class SharedRule:
    """How an unallocated line is split among teams (see the module docstring)."""

    method: str
    # FIXED only: (team id, non-negative integer weight), e.g. percent x 10^6.
    fixed: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class LineItem:
    """One billed line item, times as UTC epoch seconds."""

    id: int
    start: int
    end: int
    # EffectiveCost, with at most MONEY_PLACES decimals.
    cost: Decimal
    # The node name when the line is a GPU compute node (matched to job nodes, or a GPU type).
    node: str | None = None
    # GPUs per node; None when the type is unknown (see JobIndex.fallback_capacity).
    gpus: int | None = None
    # Owner of a non-node line: TAGGED with a team, or UNALLOCATED.
    category: str = UNALLOCATED
    # Owner team: of the whole line for non-node lines, of the idle part for node lines (the
    # service puts the idle policy's keep / platform owner here).
    team_id: int | None = None
    # Ledger group (the service's dimension index): spread idle is pooled within one group only.
    group: int = 0
    # Provider and currency: the scope of `gpu_spend` weights.
    provider: str = ""
    currency: str = ""
    # Node lines under the `spread` idle policy: the pool whose jobs take the idle.
    spread_pool: str | None = None
    # Unallocated non-node lines matched by a shared-cost rule.
    shared: SharedRule | None = None
    # ListCost (the on-demand equivalent) and ContractedCost, split exactly as cost is: the
    # same weights, each column rounded on its own, so each conserves per line item.
    list_cost: Decimal = _ZERO
    contracted_cost: Decimal = _ZERO


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    nodes: tuple[str, ...]
    start: int
    # None while running.
    end: int | None
    # Total GPUs over all nodes, in millionths of a GPU...
    gpu_micros: int
    team_id: int | None = None
    # ...divided by this, so fractions stay exact: a 1/7 MIG slice is (GPU_SCALE, 7).
    gpu_denominator: int = 1
    # Total GPUs the job requested when it is charged for fewer (charge basis `used`: micros and
    # denominator then carry GPUs x utilisation); None: it is charged for what it requested.
    # Only sizes nodes of unknown type (JobIndex.fallback_capacity).
    requested_gpus: Fraction | None = None
    # Category of the job's GPU shares: TRAINING, or INFERENCE for a pod serving an endpoint.
    category: str = TRAINING


class Share(NamedTuple):
    """One rounded piece of one line item. A NamedTuple rather than a dataclass: the engine makes
    millions of them and tuples are several times cheaper to build."""

    line_id: int
    # UTC day of the bucket as days since 1970-01-01.
    day: int
    category: str
    team_id: int | None
    job_id: int | None
    node: str
    # Signed amount in MONEY_QUANTUM units (10^-MONEY_PLACES).
    units: int
    # GPU-seconds behind a job share (0 for idle and non-node shares, and for a bucket of the
    # same node already counted by an earlier line item, so gpu-seconds are never doubled).
    gpu_seconds: Decimal = _ZERO
    # The line's ListCost and ContractedCost parts, signed units, same weights as units.
    list_units: int = 0
    contracted_units: int = 0

    @property
    def amount(self) -> Decimal:
        return units_to_decimal(self.units)


# Share(...) runs a Python-level __new__; the engine builds millions of shares, so its hot paths
# call tuple.__new__ directly (same Share instances, no keyword defaults: pass all 10 fields).
_new_share = tuple.__new__


class _Seconds(dict[tuple[int, int], Decimal]):
    """GPU-seconds as Decimal, memoised per (integer weight, unit): the same whole-hour weights
    recur millions of times, and a 50-digit division costs more than a dict lookup. The values
    are exactly those of _CTX.divide(Decimal(weight), Decimal(unit))."""

    __slots__ = ()

    def __missing__(self, key: tuple[int, int]) -> Decimal:
        value = self[key] = _CTX.divide(Decimal(key[0]), Decimal(key[1]))
        return value


def units_to_decimal(units: int) -> Decimal:
    return Decimal(units).scaleb(-MONEY_PLACES, _CTX)


def decimal_to_units(amount: Decimal) -> int:
    """Exact integer count of MONEY_QUANTUM in amount; refuses amounts with more decimals."""
    scaled = amount.scaleb(MONEY_PLACES, _CTX)
    units = int(scaled)
    if scaled != units:
        raise ValueError(f"{amount} has more than {MONEY_PLACES} decimal places")
    return units


def gpu_micros(gpus: Decimal | int) -> int:
    return int(_CTX.multiply(Decimal(gpus), Decimal(GPU_SCALE)).to_integral_value())


def largest_remainder(total: int, weights: Sequence[int]) -> list[int]:
    """Split the non-negative integer total in proportion to non-negative integer weights.

    Each part gets floor(total x w / sum), then the units still missing go one each to the parts
    with the largest remainders; ties go to the earlier part (deterministic). The parts sum to
    total exactly.
    """
    denominator = sum(weights)
    if denominator == 0:
        if total:
            raise ValueError("cannot split a non-zero total over zero weights")
        return [0] * len(weights)
    parts: list[int] = []
    remainders: list[int] = []
    for weight in weights:
        quotient, remainder = divmod(total * weight, denominator)
        parts.append(quotient)
        remainders.append(remainder)
    missing = total - sum(parts)
    if missing:
        order = sorted(range(len(parts)), key=lambda i: (-remainders[i], i))
        for i in order[:missing]:
            parts[i] += 1
    return parts


def _signed_parts(amount: Decimal, weights: Sequence[int]) -> list[int]:
    """largest_remainder of a signed amount: split by magnitude, the sign given back."""
    if not amount:
        return [0] * len(weights)
    total, sign = _signed_units(amount)
    parts = largest_remainder(total, weights)
    return parts if sign > 0 else [-part for part in parts]


def _split_columns(
    line: LineItem, weights: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """Signed parts of the line's cost, ListCost and ContractedCost over the same weights.

    The other columns are the cost parts plus the largest-remainder split of their difference
    to the cost: each column still sums exactly to its amount, and every part moves the same
    way as its line (ListCost >= EffectiveCost gives every share list >= cost; splitting each
    column on its own would not: the largest-remainder method can give a larger total a
    smaller part, the Alabama paradox). Equal amounts (on-demand lines: ListCost ==
    EffectiveCost) cost no second split."""
    cost = _signed_parts(line.cost, weights)
    return (
        cost,
        _plus_difference(cost, line.list_cost - line.cost, weights),
        _plus_difference(cost, line.contracted_cost - line.cost, weights),
    )


def _plus_difference(base: list[int], difference: Decimal, weights: Sequence[int]) -> list[int]:
    if not difference:
        return base
    return [b + d for b, d in zip(base, _signed_parts(difference, weights), strict=True)]


def match_node(
    *,
    resource_name: str,
    resource_id: str,
    tags: Mapping[str, object],
    node_names: Mapping[str, str],
) -> str | None:
    """The job-log node name a billed resource is, or None.

    node_names maps each node name to itself and its lower-case form to it. Exact matches are
    tried first (resource name, resource id, node-name tags), then the last path segment of an
    id such as an ARN or an Azure resource id (".../virtualMachines/gpu-node-01"), then the same
    case-insensitively (Azure upper-cases resource ids at random).
    """
    candidates: list[str] = [resource_name, resource_id]
    for key in NODE_TAG_KEYS:
        value = tags.get(key)
        if isinstance(value, str):
            candidates.append(value)
    for value in (resource_id, resource_name):
        if "/" in value:
            candidates.append(value.rstrip("/").rsplit("/", 1)[-1])
    candidates.extend(filter(None, map(_scale_set_node_name, candidates)))
    for value in candidates:
        if value and value in node_names:
            return node_names[value]
    for value in candidates:
        if value and value.lower() in node_names:
            return node_names[value.lower()]
    return None


_SCALE_SET_INSTANCE_RE = re.compile(r"^(?P<scale_set>[A-Za-z0-9][A-Za-z0-9-]*)_(?P<id>\d+)$")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _scale_set_node_name(value: str) -> str | None:
    """The host name of an Azure scale set VM billed as "<scale set>_<instance id>": the scale
    set's name (its computer name prefix, as AKS sets it) and the instance id in base 36, six
    digits ("aks-gpu-42850074-vmss_37" -> "aks-gpu-42850074-vmss000011"), which is what the
    node is called in Kubernetes and in Slurm."""
    match = _SCALE_SET_INSTANCE_RE.match(value)
    if match is None:
        return None
    number, digits = int(match["id"]), ""
    while True:
        number, rest = divmod(number, 36)
        digits = _BASE36[rest] + digits
        if not number:
            break
    return match["scale_set"] + digits.rjust(6, "0")


def node_name_map(names: Iterable[str]) -> dict[str, str]:
    """The node_names argument of match_node: exact names win over lower-case aliases."""
    exact = sorted(set(names))
    mapping = {name.lower(): name for name in exact}
    mapping.update({name: name for name in exact})
    return mapping


# A job as stored in the index: (start, end, gpu_micros, node_count, job_id, team_id, category).
_Entry = tuple[int, int, int, int, int, "int | None", str]


class JobIndex:
    """Jobs by node and UTC hour, so a line item finds its jobs without scanning."""

    def __init__(self, jobs: Iterable[Job], *, nodes: set[str], horizon: int) -> None:
        self.by_hour: dict[str, dict[int, list[_Entry]]] = {}
        self.by_node: dict[str, list[_Entry]] = defaultdict(list)
        self._capacity: dict[str, int] = {}
        # Job id -> requested GPUs per node, for jobs charged for fewer (Job.requested_gpus).
        self._requested: dict[int, Fraction] = {}
        for job in sorted(jobs, key=lambda j: j.id):
            # A running job runs until the last charge period ends (cost to date).
            end = horizon if job.end is None else job.end
            job_nodes = list(dict.fromkeys(job.nodes))  # a node listed twice is still one node
            if end <= job.start or job.gpu_micros <= 0 or not job_nodes:
                continue
            # GPUs per node = gpu_micros / (node count x denominator x GPU_SCALE): folding the
            # denominator into the count keeps every weight an integer (K = lcm of counts).
            count = len(job_nodes) * job.gpu_denominator
            entry: _Entry = (
                job.start, end, job.gpu_micros, count, job.id, job.team_id, job.category,
            )  # fmt: skip
            if job.requested_gpus is not None:
                self._requested[job.id] = job.requested_gpus / len(job_nodes)
            first_hour, last_hour = job.start // HOUR, (end - 1) // HOUR
            for node in job_nodes:
                if node not in nodes:
                    continue  # no bill for this node: nothing to charge
                self.by_node[node].append(entry)
                hours = self.by_hour.setdefault(node, {})
                for hour in range(first_hour, last_hour + 1):
                    hours.setdefault(hour, []).append(entry)

    def fallback_capacity(self, node: str) -> int:
        """GPUs of a node whose type the catalogue does not know: the most GPUs its jobs ever
        held (requested, whatever the charge basis) at the same instant, rounded up to whole GPUs
        (a node has whole GPUs; MIG slices add up), at least 1. Never less than what the jobs
        held, so the jobs are charged in full and idle is whatever remains."""
        if node not in self._capacity:
            events: list[tuple[int, int, Fraction]] = []
            requested = self._requested
            for start, end, micros, count, job_id, _, _ in self.by_node.get(node, ()):
                # What the job requested, not what it is charged for: a node is never sized
                # below the GPUs its jobs were allocated.
                held = requested.get(job_id) or Fraction(micros, count * GPU_SCALE)
                events.append((start, 1, held))
                events.append((end, 0, -held))  # ends sort first at equal times: end exclusive
            events.sort(key=lambda e: (e[0], e[1]))
            peak = level = Fraction(0)
            for _, _, delta in events:
                level += delta
                peak = max(peak, level)
            self._capacity[node] = max(1, math.ceil(peak))
        return self._capacity[node]


def attribute(lines: Iterable[LineItem], jobs: Iterable[Job]) -> list[Share]:
    """Split every line item into shares that sum exactly to its cost."""
    ordered = sorted(lines, key=lambda line: line.id)
    nodes = {line.node for line in ordered if line.node is not None}
    horizon = max((line.end for line in ordered), default=0)
    index = JobIndex(jobs, nodes=nodes, horizon=horizon)
    counted: set[tuple[str, int, int]] = set()
    seconds = _Seconds()
    shares: list[Share] = []
    for line in ordered:
        if line.node is None:
            _spread_by_day(line, line.category, line.team_id, "", shares)
        else:
            _split_node_line(line, index, counted, seconds, shares)
    shares = _spread_idle(ordered, shares)
    return _split_shared(ordered, shares)


def _spread_idle(ordered: Sequence[LineItem], shares: list[Share]) -> list[Share]:
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
        if share.category in _GPU_CATEGORIES and share.node in node_pool:
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
        per_job = weights[(pool, day)]
        job_ids = sorted(per_job)
        job_weights = [per_job[j] for j in job_ids]
        cost_parts = _split_units(units, job_weights)
        columns = zip(
            job_ids,
            cost_parts,
            _split_units(list_units - units, job_weights, cost_parts),
            _split_units(contracted_units - units, job_weights, cost_parts),
            strict=True,
        )
        for job_id, part, list_part, contracted_part in columns:
            if part or list_part or contracted_part:
                kept.append(
                    Share(
                        line_id, day, IDLE, job_team[job_id], job_id, "", part, _ZERO, list_part,
                        contracted_part,
                    )
                )  # fmt: skip
    return kept


def _split_units(
    units: int, weights: Sequence[int], base: Sequence[int] | None = None
) -> list[int]:
    """Signed integer units split by largest remainder (by magnitude, the sign given back),
    added to base when given (a column as the cost parts plus its difference: _split_columns)."""
    if not units:
        return list(base) if base is not None else [0] * len(weights)
    parts = largest_remainder(abs(units), weights)
    if units < 0:
        parts = [-part for part in parts]
    if base is not None:
        parts = [b + p for b, p in zip(base, parts, strict=True)]
    return parts


def _split_shared(ordered: Sequence[LineItem], shares: list[Share]) -> list[Share]:
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
            memo[memo_key] = _shared_weights(line, spend, gpu)
        teams, weights = memo[memo_key]
        if not teams:
            result.append(share)  # nobody to share with: stays unallocated
            continue
        cost_parts = _split_units(share.units, weights)
        columns = zip(
            teams,
            cost_parts,
            _split_units(share.list_units - share.units, weights, cost_parts),
            _split_units(share.contracted_units - share.units, weights, cost_parts),
            strict=True,
        )
        for team_id, part, list_part, contracted_part in columns:
            if part or list_part or contracted_part:
                result.append(
                    Share(
                        share.line_id, share.day, SHARED, team_id, None, "", part, _ZERO,
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


def _shared_weights(
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


@functools.lru_cache(maxsize=1 << 16)
def _signed_units(cost: Decimal) -> tuple[int, int]:
    # Memoised: an hourly node line costs the same hour after hour, and this runs once per line.
    units = decimal_to_units(cost)
    return abs(units), (-1 if units < 0 else 1)


def _spread_by_day(
    line: LineItem, category: str, team_id: int | None, node: str, out: list[Share]
) -> None:
    """The whole line to one owner, spread over the UTC days of its charge period by seconds."""
    if line.end <= line.start:
        # No duration to spread over: all of it on the day the charge period starts.
        days: Sequence[int] = (line.start // DAY,)
        weights = [1]
    else:
        days = range(line.start // DAY, (line.end - 1) // DAY + 1)
        weights = [min(line.end, (d + 1) * DAY) - max(line.start, d * DAY) for d in days]
    cost, listed, contracted = _split_columns(line, weights)
    for day, units, list_units, contracted_units in zip(
        days, cost, listed, contracted, strict=True
    ):
        out.append(
            Share(
                line.id, day, category, team_id, None, node, units, _ZERO, list_units,
                contracted_units,
            )
        )  # fmt: skip


def _split_node_line(
    line: LineItem,
    index: JobIndex,
    counted: set[tuple[str, int, int]],
    seconds_of: _Seconds,
    out: list[Share],
) -> None:
    node = line.node
    assert node is not None
    hours = index.by_hour.get(node)
    if not hours or line.end <= line.start:
        _spread_by_day(line, IDLE, line.team_id, node, out)
        return

    # Pass 1: the jobs in each bucket and their overlap seconds.
    buckets: list[tuple[int, int, list[tuple[_Entry, int]]]] = []
    node_counts: set[int] = set()
    for hour in range(line.start // HOUR, (line.end - 1) // HOUR + 1):
        b_start = max(line.start, hour * HOUR)
        b_end = min(line.end, (hour + 1) * HOUR)
        hits: list[tuple[_Entry, int]] = []
        for entry in hours.get(hour, ()):
            overlap = min(entry[1], b_end) - max(entry[0], b_start)
            if overlap > 0:
                hits.append((entry, overlap))
                node_counts.add(entry[3])
        buckets.append((b_start, b_end, hits))
    if not node_counts:
        _spread_by_day(line, IDLE, line.team_id, node, out)
        return
    gpus = line.gpus if line.gpus else index.fallback_capacity(node)
    if len(buckets) == 1:
        _split_one_bucket(line, node, gpus, buckets[0], node_counts, counted, seconds_of, out)
        return

    # Integer weights: a job's GPU-seconds in a bucket are micros x overlap / node_count; scaling
    # every weight by K = lcm(node counts) makes them all integers. A bucket's capacity is
    # GPUs x GPU_SCALE x K x L in the same unit.
    k = math.lcm(*node_counts)
    per_second = gpus * GPU_SCALE * k
    weighed: list[tuple[int, int, int, list[tuple[_Entry, int]], int]] = []
    oversubscribed: list[int] = []
    for b_start, b_end, hits in buckets:
        held = sum(e[2] * (k // e[3]) * overlap for e, overlap in hits)
        weighed.append((b_start, b_end, held, hits, b_end - b_start))
        if held > per_second * (b_end - b_start):
            oversubscribed.append(held)
    # Common denominator T x M of all exact shares (see module docstring):
    #   job (normal bucket)  = U x w / (T x per_second)   = U x w*(M/per_second) / (T*M)
    #   idle (normal bucket) = U x (cap - held) / (T x per_second)
    #   job (oversubscribed) = U x (L/T) x w / held       = U x L*w*(M/held) / (T*M)
    m = math.lcm(per_second, *oversubscribed)
    normal_factor = m // per_second

    numerators: dict[tuple[int, int | None], int] = {}
    gpu_weight: dict[tuple[int, int | None], int] = {}
    # Job id -> (team id, category) of its shares.
    owners: dict[int, tuple[int | None, str]] = {}
    for b_start, b_end, held, hits, length in weighed:
        day = b_start // DAY
        bucket_key = (node, b_start, b_end)
        count_gpu = bucket_key not in counted
        counted.add(bucket_key)
        capacity = per_second * length
        over = held > capacity
        for entry, overlap in hits:
            weight = entry[2] * (k // entry[3]) * overlap
            key = (day, entry[4])
            owners[entry[4]] = (entry[5], entry[6])
            share = length * weight * (m // held) if over else weight * normal_factor
            numerators[key] = numerators.get(key, 0) + share
            if count_gpu:
                gpu_weight[key] = gpu_weight.get(key, 0) + weight
            else:
                gpu_weight.setdefault(key, 0)
        if not over and capacity > held:
            idle_key = (day, None)
            numerators[idle_key] = numerators.get(idle_key, 0) + (capacity - held) * normal_factor

    keys = list(numerators)
    # The numerators sum to T x M by construction, so largest_remainder's denominator is it.
    cost, listed, contracted = _split_columns(line, [numerators[key] for key in keys])
    gpu_unit = k * GPU_SCALE
    for (day, job_id), units, list_units, contracted_units in zip(
        keys, cost, listed, contracted, strict=True
    ):
        if job_id is None:
            out.append(
                Share(
                    line.id, day, IDLE, line.team_id, None, node, units, _ZERO, list_units,
                    contracted_units,
                )
            )  # fmt: skip
        else:
            seconds = seconds_of[(gpu_weight[(day, job_id)], gpu_unit)]
            team_id, category = owners[job_id]
            out.append(
                Share(
                    line.id, day, category, team_id, job_id, node, units, seconds, list_units,
                    contracted_units,
                )
            )  # fmt: skip


def _split_one_bucket(
    line: LineItem,
    node: str,
    gpus: int,
    bucket: tuple[int, int, list[tuple[_Entry, int]]],
    node_counts: set[int],
    counted: set[tuple[str, int, int]],
    seconds_of: _Seconds,
    out: list[Share],
) -> None:
    """The common case (an hourly line item): the same split as _split_node_line with a single
    bucket, where the denominator is simply the capacity, or what the jobs hold when more."""
    b_start, b_end, hits = bucket
    k = math.lcm(*node_counts) if len(node_counts) > 1 else next(iter(node_counts))
    weights = [e[2] * (k // e[3]) * overlap for e, overlap in hits]
    held = sum(weights)
    capacity = gpus * GPU_SCALE * k * (b_end - b_start)
    if capacity > held:
        weights.append(capacity - held)  # idle
    parts, listed, contracted = _split_columns(line, weights)
    day = b_start // DAY
    bucket_key = (node, b_start, b_end)
    count_gpu = bucket_key not in counted
    counted.add(bucket_key)
    gpu_unit = k * GPU_SCALE
    line_id = line.id
    append = out.append
    for (entry, _), weight, units, list_units, contracted_units in zip(
        hits, weights, parts, listed, contracted, strict=False
    ):
        seconds = seconds_of[(weight, gpu_unit)] if count_gpu else _ZERO
        append(
            _new_share(
                Share,
                (
                    line_id,
                    day,
                    entry[6],
                    entry[5],
                    entry[4],
                    node,
                    units,
                    seconds,
                    list_units,
                    contracted_units,
                ),
            )
        )
    if capacity > held:
        append(
            _new_share(
                Share,
                (
                    line_id,
                    day,
                    IDLE,
                    line.team_id,
                    None,
                    node,
                    parts[-1],
                    _ZERO,
                    listed[-1],
                    contracted[-1],
                ),
            )
        )
