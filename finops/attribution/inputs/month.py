"""Attribution inputs for one billing month: the line items, jobs and node map, read from the
database and shaped as the engine's values (engine.LineItem, engine.Job).

Which rows take part:
- Line items whose billing_period is the month (the invoice they appear on, DESIGN section 4),
  of settled import batches only (CostLineItem.objects.settled()): while a restatement is being
  imported its rows sit beside the old batch's, and counting both would double the month.
- Jobs that started (start not null), hold GPUs, and overlap [earliest charge period start,
  latest charge period end) of those line items.

Reading is in two passes: the line items are staged while team owners are only references
(TeamRef: a team may still have to be created), then TeamResolver creates the missing teams in
one insert and the staged values become engine values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections, models
from django.db.models import Max, Min

from billing_ingest.models import CostLineItem
from finops.attribution import engine
from finops.attribution.engine.line_block import LineBlock
from finops.attribution.inputs.charge_rollups import ChargeSums
from finops.attribution.inputs.jobs import (
    BATCH_SIZE,
    JobMeta,
    StagedJob,
    engine_jobs,
    epoch,
    job_node_names,
    jobs_load,
    values_with_epochs,
)
from finops.attribution.inputs.line_columns import block_templates, stage_columns
from finops.attribution.inputs.line_staging import (
    LINE_FIELDS,
    Dims,
    LineStager,
    engine_lines,
    line_owners,
)
from finops.attribution.inputs.orm_rows import ALL, values_rows
from finops.attribution.inputs.policies import (
    IdlePolicies,
    SharedRules,
    node_clusters,
)
from finops.attribution.inputs.team_mapping import TeamResolver


@dataclass(slots=True)
class Inputs:
    lines: list[engine.LineItem] = field(default_factory=list)
    # GPU node lines read as columns (line_columns.py; PostgreSQL and the vectorised engine):
    # not in lines.
    block: LineBlock = field(default_factory=LineBlock.empty)
    line_dims: dict[int, int] = field(default_factory=dict)  # line id -> index in dims
    dims: list[Dims] = field(default_factory=list)
    jobs: list[engine.Job] = field(default_factory=list)
    job_meta: dict[int, JobMeta] = field(default_factory=dict)
    # Jobs charged for less than they requested (charge basis `used`): job id -> requested GPUs.
    requested_gpus: dict[int, Fraction] = field(default_factory=dict)
    # Where running jobs end: the month's latest charge period end (epoch seconds), whatever
    # part of the month's lines was loaded.
    horizon: int = 0
    # The month's jobs (a part loads only those on its nodes: len(jobs) is the part's).
    month_jobs: int = 0


_QuerySet = TypeVar("_QuerySet", bound=models.QuerySet[Any])


@dataclass(frozen=True, slots=True)
class ResourceRange:
    """A part of a month's line items: those whose resource_id is in [first, stop) in the
    database's order (None: unbounded). Every line of a billed resource is in one part."""

    first: str | None = None
    stop: str | None = None

    def restrict(self, queryset: _QuerySet) -> _QuerySet:
        if self.first is not None:
            queryset = queryset.filter(resource_id__gte=self.first)
        if self.stop is not None:
            queryset = queryset.filter(resource_id__lt=self.stop)
        return queryset


def lines_base(month: dt.date, part: ResourceRange | None = None) -> models.QuerySet[Any]:
    """The month's (or a part's) line items attribution reads, in id order."""
    queryset = CostLineItem.objects.settled().filter(billing_period=month).order_by("id")
    return queryset if part is None else part.restrict(queryset)


def lines_queryset(
    month: dt.date, *, epochs: bool = False, part: ResourceRange | None = None
) -> models.QuerySet[Any]:
    """The month's line items as value tuples (unevaluated; _rows reads it).

    epochs: on PostgreSQL, read the charge period as epoch seconds computed by the server.
    Django's timestamptz loader is Python code run for every cell, before any memoisation can
    help; SQLite hands out text, which _rows converts once per distinct hour."""
    queryset = lines_base(month, part)
    if not epochs:
        return queryset.values_list(*LINE_FIELDS)
    return _with_epochs(queryset)


def _with_epochs(queryset: models.QuerySet[Any]) -> models.QuerySet[Any]:
    return values_with_epochs(queryset, LINE_FIELDS, ("charge_period_start", "charge_period_end"))


def _rows_of(queryset: models.QuerySet[Any]) -> Iterable[tuple[Any, ...]]:
    """The value tuples of line items (a queryset of CostLineItem), for LineStager."""
    return line_rows(_with_epochs(queryset))


def columns_wanted(using: str) -> bool:
    """Whether the month's GPU node lines are read as columns (line_columns.py): on PostgreSQL
    (binary COPY) for the vectorised engine, unless settings.FINOPS_ATTRIBUTION_COLUMNS is
    off."""
    return (
        connections[using].vendor == "postgresql"
        and settings.FINOPS_ATTRIBUTION_ENGINE == "vector"
        and settings.FINOPS_ATTRIBUTION_COLUMNS
    )


@dataclass(frozen=True, slots=True)
class MonthScope:
    """What every part of a split month reads alike: the month's charge bounds, every node name
    its jobs ran on and how many jobs. Read once by whoever plans the parts and handed to
    each (a 2 s aggregate over the line items and a 1 s grouping of the jobs, at 10,000
    nodes, that each of 8 parts repeated)."""

    first: dt.datetime
    last: dt.datetime
    names: frozenset[str]
    jobs: int

    def state(self) -> list[Any]:
        """Plain values for a task's arguments (JSON)."""
        return [self.first.isoformat(), self.last.isoformat(), sorted(self.names), self.jobs]

    @classmethod
    def from_state(cls, state: list[Any]) -> MonthScope:
        first, last, names, jobs = state
        return cls(
            dt.datetime.fromisoformat(first), dt.datetime.fromisoformat(last), frozenset(names),
            int(jobs),
        )  # fmt: skip


def month_scope_load(*, month: dt.date) -> MonthScope | None:
    """The month's MonthScope as it is now; None: the month has no line items."""
    bounds = _charge_bounds(month)
    if bounds is None:
        return None
    names, jobs = job_node_names(*bounds)
    return MonthScope(bounds[0], bounds[1], frozenset(names), jobs)


def inputs_load(
    *,
    month: dt.date,
    part: ResourceRange | None = None,
    charges: ChargeSums | None = None,
    scope: MonthScope | None = None,
) -> tuple[Inputs, int]:
    """The month's engine inputs (month: its first day), or those of a part of its line items
    with the jobs that ran on the part's nodes (no other job can change the part's shares:
    engine.allocate_lines), and the number of line items read. charges: also sum the budget
    rollups of the line items read there (one read of the month instead of two). scope: the
    month's, read by the plan (else read here)."""
    inputs = Inputs()
    resolver = TeamResolver.from_db()
    whole = part is None or (part.first is None and part.stop is None)
    if scope is None and not whole:
        scope = month_scope_load(month=month)
    bounds = _charge_bounds(month) if scope is None else (scope.first, scope.last)
    if bounds is None:
        return inputs, 0
    inputs.horizon = epoch(bounds[1])
    staged_jobs: list[StagedJob] = []
    names: Iterable[str]
    if whole:
        staged_jobs = jobs_load(inputs, resolver, *bounds)
        names = (node for job in staged_jobs for node in job[1])
        inputs.month_jobs = len(staged_jobs)
    else:
        assert scope is not None
        names, inputs.month_jobs = scope.names, scope.jobs
    stager = LineStager(resolver, engine.node_name_map(names), SharedRules.from_db(), charges)
    base = lines_base(month, part)
    read = stage_columns(stager, base, _rows_of) if columns_wanted(base.db) else None
    if read is None:
        staged, block = stager.stage_all(_rows_of(base)), LineBlock.empty()
    else:
        staged, block = read
    if not whole:
        part_nodes = {res.node for res in stager.resources if res.node is not None}
        staged_jobs = jobs_load(inputs, resolver, *bounds, nodes=part_nodes)
    # Node -> cluster is decided per node from all the jobs on it: a part has all of its nodes'.
    job_nodes = [(node, inputs.job_meta[job[0]].cluster) for job in staged_jobs for node in job[1]]
    idle_policies = IdlePolicies.from_db(node_clusters(job_nodes))
    inputs.dims = stager.dims()
    inputs.line_dims = stager.line_dims
    # Teams named by the month's rows but not created yet are created here, in one insert.
    resolver.materialise()
    owners = line_owners(stager, resolver, idle_policies)
    inputs.lines = engine_lines(staged, stager, resolver, idle_policies, owners)
    inputs.block = block_templates(block, owners)
    inputs.jobs = engine_jobs(inputs, staged_jobs, resolver)
    return inputs, len(staged) + len(block)


def _charge_bounds(month: dt.date) -> tuple[dt.datetime, dt.datetime] | None:
    """[earliest charge period start, latest end) of the month's line items; None: no items."""
    bounds = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .aggregate(first=Min("charge_period_start"), last=Max("charge_period_end"))
    )
    if bounds["first"] is None:
        return None
    return bounds["first"], bounds["last"]


def line_rows(queryset: models.QuerySet[Any]) -> Iterable[tuple[Any, ...]]:
    """The line items' value tuples for _LineStager, tags as the database's JSON text.

    On PostgreSQL every column as psycopg hands it out: what the ORM's converters would return
    (Decimal money, unchanged by MoneyField; epochs as Decimal; int; str), without running them
    on every cell. Elsewhere the ORM's converters, the charge periods once per distinct value."""
    if connections[queryset.db].vendor == "postgresql":
        return values_rows(queryset, (), chunk_size=BATCH_SIZE, raw=ALL)
    memoised = ("charge_period_start", "charge_period_end")
    return values_rows(queryset, memoised, chunk_size=BATCH_SIZE, raw=("tags",))
