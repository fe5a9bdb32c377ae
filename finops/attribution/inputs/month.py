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
from decimal import Decimal
from fractions import Fraction
from typing import Any, TypeVar

from django.db import models
from django.db.models import Max, Min

from billing_ingest.models import CostLineItem
from finops.attribution import engine
from finops.attribution.inputs.catalogue import line_gpu_spec
from finops.attribution.inputs.charge_rollups import ChargeSums
from finops.attribution.inputs.jobs import (
    BATCH_SIZE,
    JobMeta,
    StagedJob,
    engine_jobs,
    epoch,
    job_node_names,
    jobs_load,
    to_datetime,
    to_epoch,
    values_with_epochs,
)
from finops.attribution.inputs.list_cost import ListCostResolver, ListLine, pricing_mix
from finops.attribution.inputs.orm_rows import values_rows
from finops.attribution.inputs.policies import (
    CommitmentPools,
    IdlePolicies,
    SharedRules,
    is_unused_commitment,
    node_clusters,
)
from finops.attribution.inputs.team_mapping import TeamRef, TeamResolver

# Dimensions of a line item copied onto its ledger rows. (provider, account, sub-account,
# service, pricing category, currency, batch id, pricing mix, on-demand equivalent's source)
Dims = tuple[str, str, str, str, str, str, int, str, str]


@dataclass(slots=True)
class Inputs:
    lines: list[engine.LineItem] = field(default_factory=list)
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


def lines_queryset(
    month: dt.date, *, epochs: bool = False, part: ResourceRange | None = None
) -> models.QuerySet[Any]:
    """The month's line items as value tuples (unevaluated; _rows reads it).

    epochs: on PostgreSQL, read the charge period as epoch seconds computed by the server.
    Django's timestamptz loader is Python code run for every cell, before any memoisation can
    help; SQLite hands out text, which _rows converts once per distinct hour."""
    queryset = CostLineItem.objects.settled().filter(billing_period=month).order_by("id")
    if part is not None:
        queryset = part.restrict(queryset)
    if not epochs:
        return queryset.values_list(*_LINE_FIELDS)
    return values_with_epochs(queryset, _LINE_FIELDS, ("charge_period_start", "charge_period_end"))


_LINE_FIELDS = (
    "id", "charge_period_start", "charge_period_end", "effective_cost", "resource_id",
    "resource_name", "resource_type", "sku_id", "tags", "x_instance_type", "x_gpu_count",
    "x_gpu_model", "charge_category", "service_category", "list_cost", "contracted_cost",
    "consumed_quantity", "consumed_unit", "commitment_discount_id",
    "commitment_discount_status", "region_id",
    "provider_name", "billing_account_id",
    "sub_account_id", "service_name", "pricing_category", "billing_currency", "batch_id",
)  # fmt: skip


def _node_name_of_gpu_line(resource_name: str, resource_id: str, tags: dict[str, object]) -> str:
    """Name for a GPU-type line that no job ran on (all idle): its node tag, name or id."""
    for key in engine.NODE_TAG_KEYS:
        value = tags.get(key)
        if isinstance(value, str) and value:
            return value
    if resource_name:
        return resource_name
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


# A line item between reading and team creation: (id, start, end, (cost, on-demand equivalent,
# contracted cost), node, GPUs, owner, shared-cost rule, unused commitment (commitment id,
# provider, instance type) or None).
_Staged = tuple[
    int,
    int,
    int,
    tuple[Decimal, Decimal, Decimal],
    str | None,
    int | None,
    TeamRef | None,
    engine.SharedRule | None,
    tuple[str, str, str] | None,
]
_ZERO = Decimal(0)
# Tags of a line without tags (one object: _LineStager keys its memo by the tags' identity).
_NO_TAGS: dict[str, object] = {}
# (node, GPUs, pricing mix, owner, unused commitment, shared-cost rule) of a line's resource.
_ResourceOfLine = tuple[
    str | None, int | None, str, TeamRef | None, tuple[str, str, str] | None,
    engine.SharedRule | None,
]  # fmt: skip


class _NodeOfLine:
    """(node name, GPUs per node) of a line item's resource, computed once per distinct
    resource: a node bills one line an hour, 744 a month, all with the same answer."""

    def __init__(self, names: dict[str, str]) -> None:
        self._names = names
        self._memo: dict[tuple[Any, ...], tuple[str | None, int | None]] = {}

    def __call__(
        self, res_id: str, res_name: str, res_type: str, sku: str, tags: dict[str, object],
        x_type: str, x_count: int | None, x_model: str,
    ) -> tuple[str | None, int | None]:  # fmt: skip
        # Only string node tags can name a node (match_node, _node_name_of_gpu_line).
        node_tags = tuple(
            value if isinstance(value, str) else None
            for value in map(tags.get, engine.NODE_TAG_KEYS)
        )
        key = (res_id, res_name, res_type, sku, x_type, x_count, x_model, node_tags)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._resolve(
                res_id, res_name, res_type, sku, tags, x_type, x_count, x_model
            )
        return found

    def _resolve(
        self, res_id: str, res_name: str, res_type: str, sku: str, tags: dict[str, object],
        x_type: str, x_count: int | None, x_model: str,
    ) -> tuple[str | None, int | None]:  # fmt: skip
        node = engine.match_node(
            resource_name=res_name, resource_id=res_id, tags=tags, node_names=self._names
        )
        spec = line_gpu_spec(
            x_instance_type=x_type, x_gpu_count=x_count, x_gpu_model=x_model, sku_id=sku,
            resource_type=res_type,
        )  # fmt: skip
        if node is None and spec is not None:
            node = _node_name_of_gpu_line(res_name, res_id, tags)
        return node, (spec.count if spec is not None else None)


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
    stager = _LineStager(resolver, engine.node_name_map(names), SharedRules.from_db(), charges)
    staged = stager.stage_all(
        values_rows(
            lines_queryset(month, epochs=True, part=part), _LINE_MEMOISED, chunk_size=BATCH_SIZE
        )
    )
    if not whole:
        part_nodes = {line[4] for line in staged if line[4] is not None}
        staged_jobs = jobs_load(inputs, resolver, *bounds, nodes=part_nodes)
    # Node -> cluster is decided per node from all the jobs on it: a part has all of its nodes'.
    job_nodes = [(node, inputs.job_meta[job[0]].cluster) for job in staged_jobs for node in job[1]]
    idle_policies = IdlePolicies.from_db(node_clusters(job_nodes))
    inputs.dims = stager.dims()
    inputs.line_dims = stager.line_dims
    # Teams named by the month's rows but not created yet are created here, in one insert.
    resolver.materialise()
    inputs.lines = _engine_lines(inputs, staged, resolver, idle_policies, stager.commitment_pools)
    inputs.jobs = engine_jobs(inputs, staged_jobs, resolver)
    return inputs, len(staged)


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


# Columns of a line item whose values repeat (charge periods hour after hour, tags): _rows
# converts each distinct value once.
_LINE_MEMOISED = ("charge_period_start", "charge_period_end", "tags")


class _LineStager:
    """The first pass over the month's line items: node and GPUs, on-demand equivalent, ledger
    dimensions, owner reference, unused commitment and shared-cost rule of each line."""

    def __init__(
        self, resolver: TeamResolver, node_names: dict[str, str], shared_rules: SharedRules,
        charges: ChargeSums | None = None,
    ) -> None:  # fmt: skip
        self.resolver = resolver
        self.charges = charges
        self._recurring = charges.recurring_categories if charges is not None else frozenset()
        self.shared_rules = shared_rules
        self.node_of_line = _NodeOfLine(node_names)
        self.commitment_pools = CommitmentPools()
        self.list_of_line = ListCostResolver()
        self.line_dims: dict[int, int] = {}
        self._dims_index: dict[Dims, int] = {}
        # Database value of a charge period bound -> epoch seconds (bounds repeat every hour),
        # and -> datetime for the budget rollups.
        self._epochs: dict[Any, int] = {}
        self._datetimes: dict[Any, dt.datetime] = {}
        self._resources: dict[tuple[Any, ...], tuple[dict[str, object], *_ResourceOfLine]] = {}

    def dims(self) -> list[Dims]:
        """The distinct ledger dimensions, in the order of the indexes in line_dims."""
        return list(self._dims_index)

    def stage_all(self, rows: Iterable[tuple[Any, ...]]) -> list[_Staged]:
        return [self.stage(row) for row in rows]

    def stage(self, row: tuple[Any, ...]) -> _Staged:
        (pk, start, end, cost, res_id, res_name, res_type, sku, tags, x_type, x_count, x_model,
         charge_category, service_category, list_cost, contracted_cost, quantity, unit,
         commitment_id, commitment_status, region, *dim_values) = row  # fmt: skip
        tags = tags if isinstance(tags, dict) else _NO_TAGS
        if self.charges is not None and (tags or charge_category in self._recurring):
            self.charges.add(
                self._datetime(start), self._datetime(end), dim_values[0], dim_values[5], cost,
                charge_category, dim_values[2], tags,
            )  # fmt: skip
        # Everything but the amounts and the period is the billed resource's (a node bills 744
        # lines a month alike): resolved once per distinct resource. Tags are keyed by identity
        # (values_rows hands out one dict per distinct JSON value), kept alive in the memo.
        key = (
            res_id, res_name, res_type, sku, id(tags), x_type, x_count, x_model, charge_category,
            service_category, commitment_id, commitment_status, *dim_values,
        )  # fmt: skip
        found = self._resources.get(key)
        if found is None or found[0] is not tags:
            found = self._resources[key] = (tags, *self._resource(row, tags))
        _, node, gpus, mix, owner, unused, shared = found
        start_s, end_s = self._epoch(start), self._epoch(end)
        list_value, list_source = self.list_of_line(
            ListLine(
                charge_category, list_cost, cost, dim_values[0], x_type, region, quantity, unit,
                end_s - start_s,
            )
        )  # fmt: skip
        dims: Dims = (*dim_values, mix, list_source)  # type: ignore[assignment]
        self.line_dims[pk] = self._dims_index.setdefault(dims, len(self._dims_index))
        columns = (cost, list_value, contracted_cost or _ZERO)
        return (pk, start_s, end_s, columns, node, gpus, owner, shared, unused)

    def _resource(self, row: tuple[Any, ...], tags: dict[str, object]) -> _ResourceOfLine:
        """What stage takes from a line's resource columns (not its amounts or period): node,
        GPUs, pricing mix, owner, unused commitment, shared-cost rule."""
        (_, _, _, _, res_id, res_name, res_type, sku, _, x_type, x_count, x_model,
         charge_category, service_category, _, _, _, _, commitment_id, commitment_status, _,
         *dim_values) = row  # fmt: skip
        node, gpus = self.node_of_line(
            res_id, res_name, res_type, sku, tags, x_type, x_count, x_model
        )
        mix = pricing_mix(
            pricing_category=dim_values[4], sku_id=sku, commitment_discount_id=commitment_id
        )
        owner = self.resolver.line_team(tags=tags, sub_account=str(dim_values[2]))
        unused = None
        if is_unused_commitment(commitment_status):
            # Capacity bought and not used is no node's usage, even when it names a GPU type.
            node, gpus, unused = None, None, (commitment_id, dim_values[0], x_type)
        elif node is not None:
            self.commitment_pools.add_node_line(
                node=node, commitment_id=commitment_id, provider=dim_values[0], instance_type=x_type
            )
        shared = None
        if node is None and unused is None and owner is None and self.shared_rules:
            provider, _, sub, service = dim_values[:4]
            shared = self.shared_rules.match(
                provider=provider, sub_account=sub, service_category=service_category,
                service_name=service, charge_category=charge_category,
            )  # fmt: skip
        return node, gpus, mix, owner, unused, shared

    def _epoch(self, value: dt.datetime | Decimal) -> int:
        seconds = self._epochs.get(value)
        if seconds is None:
            seconds = self._epochs[value] = to_epoch(value)
        return seconds

    def _datetime(self, value: dt.datetime | Decimal) -> dt.datetime:
        found = self._datetimes.get(value)
        if found is None:
            found = self._datetimes[value] = to_datetime(value)
        return found


def _engine_lines(
    inputs: Inputs,
    staged: list[_Staged],
    resolver: TeamResolver,
    idle_policies: IdlePolicies,
    commitment_pools: CommitmentPools,
) -> list[engine.LineItem]:
    """The second pass: owners become team ids, and the idle policy decides who owns (or
    spreads) the idle of node lines and of unused commitments."""
    lines: list[engine.LineItem] = []
    for pk, start_s, end_s, columns, node, gpus, owner, shared, unused in staged:
        cost, list_value, contracted = columns
        team_id = resolver.team_id(owner)
        category = engine.TAGGED if team_id is not None else engine.UNALLOCATED
        pool = None
        if node is not None:
            # The idle policy decides who owns the node line's idle part (or spreads it).
            idle = idle_policies.for_node(node)
            team_id, pool = idle.idle_owner(team_id), idle.pool
        elif unused is not None:
            # Unused commitment is idle capacity: the idle policy of the pool it was bought for.
            commitment_id, provider_name, instance_type = unused
            idle = commitment_pools.idle_of(
                idle_policies,
                commitment_id=commitment_id,
                provider=provider_name,
                instance_type=instance_type,
            )
            category, team_id, pool = engine.IDLE, idle.idle_owner(team_id), idle.pool
        group = inputs.line_dims[pk]
        provider, currency = inputs.dims[group][0], inputs.dims[group][5]
        lines.append(
            engine.LineItem(
                pk,
                start_s,
                end_s,
                cost,
                node,
                gpus,
                category,
                team_id,
                group=group,
                provider=provider,
                currency=currency,
                spread_pool=pool,
                shared=shared,
                list_cost=list_value,
                contracted_cost=contracted,
            )
        )
    return lines
