"""The demo GPU fleet: node pools per cloud, their prices, and when each node is billed.

Everything here is pure data and arithmetic on a seeded random.Random, so the same seed and month
always give the same fleet. Times are integer seconds since the month start (UTC); nodes are
billed in whole hours, so every availability interval starts and ends on an hour boundary.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from random import Random

HOUR = 3600
DAY = 24 * HOUR


class Scale:
    FULL = "full"
    SMALL = "small"
    CHOICES = (FULL, SMALL)


@dataclass(frozen=True)
class InstanceType:
    name: str
    provider: str
    gpu_model: str
    gpus: int
    vcpus: int
    mem_gib: int
    # Public on-demand price per node-hour (USD).
    list_price: Decimal
    # Hostname prefix of nodes of this type, e.g. "aws-p5" -> aws-p5-001.
    prefix: str


INSTANCE_TYPES: dict[str, InstanceType] = {
    t.name: t
    for t in (
        InstanceType("p5.48xlarge", "AWS", "h100", 8, 192, 2048, Decimal("98.32"), "aws-p5"),
        InstanceType("p4d.24xlarge", "AWS", "a100", 8, 96, 1152, Decimal("32.7726"), "aws-p4d"),
        InstanceType("a3-highgpu-8g", "GCP", "h100", 8, 208, 1872, Decimal("88.2528"), "gcp-a3"),
        InstanceType("a2-highgpu-8g", "GCP", "a100", 8, 96, 680, Decimal("29.3878"), "gcp-a2"),
        InstanceType(
            "Standard_ND96isr_H100_v5", "Azure", "h100", 8, 96, 1900, Decimal("98.32"), "azure-h100"
        ),
        # A100 80GB: the pool whose GPUs are MIG-partitioned (mig-3g.40gb, mig-1g.10gb).
        InstanceType(
            "Standard_ND96amsr_A100_v4",
            "Azure",
            "a100",
            8,
            96,
            1900,
            Decimal("32.77"),
            "azure-a100",
        ),
        InstanceType(
            "gd-8xh100ib-i128", "CoreWeave", "h100", 8, 128, 2048, Decimal("49.24"), "cw-h100"
        ),
    )
}


class Pricing:
    STANDARD = "Standard"
    DYNAMIC = "Dynamic"  # spot / preemptible
    COMMITTED = "Committed"


class JobsFormat:
    SLURM = "slurm"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True)
class Cloud:
    """One provider: its billing account, the cluster we run there and its time zone."""

    provider: str  # FOCUS ProviderName
    key: str  # file stem and ingest source prefix
    cluster: str
    time_zone: str
    region_id: str
    region_name: str
    # How the cluster's scheduler reports jobs: sacct, or a Kubernetes pod list.
    jobs_format: str = JobsFormat.SLURM


CLOUDS: tuple[Cloud, ...] = (
    Cloud("AWS", "aws", "aws-east", "UTC", "us-east-1", "US East (N. Virginia)"),
    # sacct on this cluster prints Chicago wall-clock time: exercises --time-zone and DST.
    Cloud("GCP", "gcp", "gcp-central", "America/Chicago", "us-central1", "Iowa"),
    # A Kubernetes cluster on Azure VMs: pods instead of sacct, inference servers, MIG.
    Cloud("Azure", "azure", "azure-west", "UTC", "westus3", "West US 3", JobsFormat.KUBERNETES),
    Cloud("CoreWeave", "coreweave", "coreweave-lga", "UTC", "US-EAST-04", "US East (LGA1)"),
)
CLOUD_BY_PROVIDER = {c.provider: c for c in CLOUDS}


@dataclass(frozen=True)
class Pool:
    """Nodes of one instance type bought one way, forming one Slurm partition."""

    instance_type: str
    pricing: str
    partition: str
    full: int
    small: int
    # Standard pools: some nodes join late or leave early (scale-up / scale-down).
    churn: bool = False
    # A commitment whose scope is exactly this pool (so idle commitment shows as Unused).
    commitment: str = ""
    # Committed pools: one node gets a maintenance gap of a few hours.
    maintenance: bool = False
    # A resource tag every node of the pool carries on the bill, e.g. ("project", "ranker").
    tag: tuple[str, str] | None = None


POOLS: tuple[Pool, ...] = (
    Pool("p5.48xlarge", Pricing.COMMITTED, "h100", 6, 1, commitment="savings_plan"),
    Pool("p5.48xlarge", Pricing.STANDARD, "h100", 6, 1, churn=True),
    Pool("p5.48xlarge", Pricing.DYNAMIC, "h100-spot", 4, 1),
    Pool("p4d.24xlarge", Pricing.STANDARD, "a100", 4, 0, churn=True),
    Pool("p4d.24xlarge", Pricing.DYNAMIC, "a100-spot", 4, 1),
    Pool("a3-highgpu-8g", Pricing.COMMITTED, "h100", 6, 1, commitment="cud"),
    Pool("a3-highgpu-8g", Pricing.STANDARD, "h100", 4, 0, churn=True),
    Pool("a2-highgpu-8g", Pricing.DYNAMIC, "a100-spot", 4, 1),
    Pool("a2-highgpu-8g", Pricing.STANDARD, "a100", 2, 0),
    Pool(
        "Standard_ND96isr_H100_v5",
        Pricing.COMMITTED,
        "h100",
        4,
        1,
        commitment="reservation",
        maintenance=True,
    ),
    Pool("Standard_ND96isr_H100_v5", Pricing.STANDARD, "h100", 4, 0, churn=True),
    # The first node of this pool is MIG-partitioned for inference and notebooks.
    Pool("Standard_ND96amsr_A100_v4", Pricing.STANDARD, "a100", 4, 1),
    Pool("Standard_ND96amsr_A100_v4", Pricing.DYNAMIC, "a100-spot", 2, 1),
    # CoreWeave bills its contract rate as standard usage; two nodes join mid-month.
    Pool("gd-8xh100ib-i128", Pricing.STANDARD, "h100", 16, 2, churn=True),
    # Steady on-demand use no commitment covers yet (what commitment advice is for): vision's
    # own A100 nodes for its continual training, and platform's always-on GPU CI runners.
    # Bought on demand at list price.
    Pool("p4d.24xlarge", Pricing.STANDARD, "a100-cv", 2, 1),
    Pool("a2-highgpu-8g", Pricing.STANDARD, "a100-ci", 2, 1),
)


@dataclass
class Node:
    hostname: str
    instance_type: InstanceType
    cloud: Cloud
    pool: Pool
    # Billed intervals [start, end) in seconds since month start, whole hours, sorted.
    up: list[tuple[int, int]] = field(default_factory=list)

    @property
    def pricing(self) -> str:
        return self.pool.pricing

    @property
    def partition(self) -> str:
        return self.pool.partition

    @property
    def cluster(self) -> str:
        return self.cloud.cluster

    def billed_hours(self) -> list[int]:
        """Hour indices (0-based from the month start) during which the node is billed."""
        return [h for s, e in self.up for h in range(s // HOUR, e // HOUR)]


@dataclass(frozen=True)
class Month:
    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> Month:
        year, month = (int(part) for part in text.split("-"))
        if not 1 <= month <= 12:
            raise ValueError(f"bad month {text!r}")
        return cls(year, month)

    @property
    def label(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def start(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """First instant of the next month (exclusive)."""
        if self.month == 12:
            return datetime(self.year + 1, 1, 1, tzinfo=UTC)
        return datetime(self.year, self.month + 1, 1, tzinfo=UTC)

    @property
    def days(self) -> int:
        return calendar.monthrange(self.year, self.month)[1]

    @property
    def seconds(self) -> int:
        return self.days * DAY


def blocked_intervals(month: Month, time_zone: str) -> list[tuple[int, int]]:
    """UTC intervals whose local wall-clock time is ambiguous (the hour repeated when DST ends):
    a job boundary there could not be converted back to UTC unambiguously."""
    if time_zone == "UTC":
        return []
    from datetime import timedelta
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(time_zone)
    blocked: list[tuple[int, int]] = []
    t = month.start
    previous = t.astimezone(zone).utcoffset()
    while t < month.end:
        offset = t.astimezone(zone).utcoffset()
        if previous is not None and offset is not None and offset < previous:
            # Offset dropped at t: local times in [t - (previous - offset), t + ...) repeat.
            width = int((previous - offset).total_seconds())
            base = int((t - month.start).total_seconds())
            blocked.append((base - width, base + width))
        previous = offset
        t += timedelta(hours=1)
    return blocked


def _spot_intervals(rng: Random, length: int) -> list[tuple[int, int]]:
    """Spot capacity: up for a few days at a time, reclaimed, re-acquired hours later."""
    hours = length // HOUR
    intervals: list[tuple[int, int]] = []
    h = rng.randrange(0, 6)
    while h < hours:
        up = max(6, int(rng.expovariate(1 / 80)))
        end = min(hours, h + up)
        intervals.append((h * HOUR, end * HOUR))
        h = end + rng.randint(2, 20)
    return intervals


def _churn_interval(rng: Random, length: int, index: int, count: int) -> list[tuple[int, int]]:
    """About a third of a churning pool (never its first node) joins late or leaves early."""
    hours = length // HOUR
    if index == 0 or not (index % 3 == 2 or index == count - 1):
        return [(0, length)]
    if rng.random() < 0.5:  # scale-down after a project ended
        return [(0, rng.randint(hours // 2, hours - 48) * HOUR)]
    return [(rng.randint(48, hours // 2) * HOUR, length)]  # scale-up


def _maintenance_intervals(rng: Random, length: int) -> list[tuple[int, int]]:
    hours = length // HOUR
    start = rng.randint(hours // 3, 2 * hours // 3)
    gap = rng.randint(4, 10)
    return [(0, start * HOUR), ((start + gap) * HOUR, length)]


@dataclass(frozen=True)
class FleetPlan:
    """How one month of a several-month demo differs from the base fleet (history.py)."""

    # Share of the on-demand and spot pools' nodes running this month (the fleet grows).
    growth: float = 1.0
    # Commitments already bought: a committed pool whose commitment is not yet bought runs
    # on demand.
    commitments: frozenset[str] = frozenset()
    # On-demand pools: every other node (never the first) is scaled down at weekends.
    weekends_off: bool = False
    # Nodes left running with nothing on them: (pool, first day, days), days 0-based.
    runaway: tuple[tuple[Pool, int, int], ...] = ()


def _pool_for(pool: Pool, plan: FleetPlan | None) -> Pool:
    if plan is None or not pool.commitment or pool.commitment in plan.commitments:
        return pool
    return replace(pool, pricing=Pricing.STANDARD, commitment="", maintenance=False)


def _count(pool: Pool, scale: str, plan: FleetPlan | None) -> int:
    count = pool.full if scale == Scale.FULL else pool.small
    if plan is None or pool.pricing == Pricing.COMMITTED or count == 0:
        return count
    return max(1, round(count * plan.growth))


def _without_weekends(intervals: list[tuple[int, int]], month: Month) -> list[tuple[int, int]]:
    """The intervals minus Saturdays and Sundays (UTC): an autoscaler's weekend scale-down."""
    weekday = month.start.weekday()
    kept: list[tuple[int, int]] = []
    for s, e in intervals:
        start = s
        for day in range(s // DAY, (e - 1) // DAY + 1):
            if (weekday + day) % 7 < 5:
                continue
            cut_from, cut_to = max(s, day * DAY), min(e, (day + 1) * DAY)
            if cut_from > start:
                kept.append((start, cut_from))
            start = max(start, cut_to)
        if start < e:
            kept.append((start, e))
    return kept


def build_fleet(
    *, rng: Random, month: Month, scale: str, plan: FleetPlan | None = None
) -> list[Node]:
    nodes: list[Node] = []
    counters: dict[str, int] = {}
    for base_pool in POOLS:
        pool = _pool_for(base_pool, plan)
        itype = INSTANCE_TYPES[pool.instance_type]
        cloud = CLOUD_BY_PROVIDER[itype.provider]
        count = _count(base_pool, scale, plan)
        for index in range(count):
            counters[itype.prefix] = counters.get(itype.prefix, 0) + 1
            node = Node(f"{itype.prefix}-{counters[itype.prefix]:03d}", itype, cloud, pool)
            if pool.pricing == Pricing.DYNAMIC:
                node.up = _spot_intervals(rng, month.seconds)
            elif pool.maintenance and index == 0:
                node.up = _maintenance_intervals(rng, month.seconds)
            elif pool.churn:
                node.up = _churn_interval(rng, month.seconds, index, count)
            else:
                node.up = [(0, month.seconds)]
            if plan and plan.weekends_off and pool.pricing == Pricing.STANDARD and index % 2:
                node.up = _without_weekends(node.up, month)
            nodes.append(node)
    for pool, first, days in plan.runaway if plan else ():
        itype = INSTANCE_TYPES[pool.instance_type]
        for _ in range(pool.full if scale == Scale.FULL else pool.small):
            counters[itype.prefix] = counters.get(itype.prefix, 0) + 1
            node = Node(
                f"{itype.prefix}-{counters[itype.prefix]:03d}", itype,
                CLOUD_BY_PROVIDER[itype.provider], pool,
            )  # fmt: skip
            node.up = [(first * DAY, min(month.seconds, (first + days) * DAY))]
            nodes.append(node)
    return nodes
