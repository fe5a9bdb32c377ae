"""The engine's values: constants shared with the models, and the dataclasses it takes and
gives (LineItem and Job in, Share out)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import NamedTuple

from finops.attribution.engine.units import ZERO, units_to_decimal

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
GPU_CATEGORIES = frozenset({TRAINING, INFERENCE})

# Node-name tags on billed resources (DESIGN section 5.1), tried in this order.
NODE_TAG_KEYS = ("finops:node", "kubernetes.io/hostname", "slurm:node", "Name")


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
    list_cost: Decimal = ZERO
    contracted_cost: Decimal = ZERO


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
    gpu_seconds: Decimal = ZERO
    # The line's ListCost and ContractedCost parts, signed units, same weights as units.
    list_units: int = 0
    contracted_units: int = 0

    @property
    def amount(self) -> Decimal:
        return units_to_decimal(self.units)


# Share(...) runs a Python-level __new__; the engine builds millions of shares, so its hot paths
# call tuple.__new__ directly (same Share instances, no keyword defaults: pass all 10 fields).
new_share = tuple.__new__
