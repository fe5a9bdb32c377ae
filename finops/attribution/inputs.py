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

from django.db import connections, models
from django.db.models import F, Func, Max, Min, Q

from billing_ingest.models import CostLineItem, JobRecord, job_gpus_exact
from finops.attribution import engine
from finops.attribution.catalogue import line_gpu_spec
from finops.attribution.charge_basis import charged_gpus, used_basis_utilisations
from finops.attribution.charge_rollups import ChargeSums
from finops.attribution.list_cost import ListCostResolver, ListLine, pricing_mix
from finops.attribution.orm_rows import values_rows
from finops.attribution.policies import (
    CommitmentPools,
    IdlePolicies,
    SharedRules,
    is_unused_commitment,
    node_clusters,
)
from finops.attribution.team_mapping import TeamRef, TeamResolver

BATCH_SIZE = 5000

# Dimensions of a line item copied onto its ledger rows. (provider, account, sub-account,
# service, pricing category, currency, batch id, pricing mix, on-demand equivalent's source)
Dims = tuple[str, str, str, str, str, str, int, str, str]


@dataclass(slots=True)
class JobMeta:
    cluster: str
    run_id: str
    state: str
    start: dt.datetime
    end: dt.datetime | None
    # The inference endpoint a pod serves (its GPU cost is `inference`), else "".
    endpoint: str = ""
    job_id: str = ""


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

    def filter(self, queryset: _QuerySet) -> _QuerySet:
        if self.first is not None:
            queryset = queryset.filter(resource_id__gte=self.first)
        if self.stop is not None:
            queryset = queryset.filter(resource_id__lt=self.stop)
        return queryset


def _epoch(value: dt.datetime) -> int:
    return int(value.timestamp())


_EPOCH_START = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _to_datetime(value: dt.datetime | Decimal) -> dt.datetime:
    """A datetime, or epoch seconds as read by lines_queryset(epochs=True) (PostgreSQL gives
    them with the timestamp's microseconds, exactly), as the datetime the ORM would give."""
    if isinstance(value, dt.datetime):
        return value
    return _EPOCH_START + dt.timedelta(microseconds=int(value.scaleb(6)))


def _to_epoch(value: dt.datetime | Decimal) -> int:
    """A datetime, or epoch seconds as read by lines_queryset(epochs=True), as _epoch gives
    it (int() truncates toward zero, as int(timestamp()) does)."""
    return _epoch(value) if isinstance(value, dt.datetime) else int(value)


def lines_queryset(
    month: dt.date, *, epochs: bool = False, part: ResourceRange | None = None
) -> models.QuerySet[Any]:
    """The month's line items as value tuples (unevaluated; _rows reads it).

    epochs: on PostgreSQL, read the charge period as epoch seconds computed by the server.
    Django's timestamptz loader is Python code run for every cell, before any memoisation can
    help; SQLite hands out text, which _rows converts once per distinct hour."""
    queryset = CostLineItem.objects.settled().filter(billing_period=month).order_by("id")
    if part is not None:
        queryset = part.filter(queryset)
    if not (epochs and connections[queryset.db].vendor == "postgresql"):
        return queryset.values_list(*_LINE_FIELDS)
    fields = list(_LINE_FIELDS)
    for name in ("charge_period_start", "charge_period_end"):
        alias = f"{name}_epoch"
        queryset = queryset.annotate(
            **{alias: Func(F(name), template="EXTRACT(EPOCH FROM %(expressions)s)",
                           output_field=models.DecimalField())}
        )  # fmt: skip
        fields[fields.index(name)] = alias
    return queryset.values_list(*fields)


_LINE_FIELDS = (
    "id", "charge_period_start", "charge_period_end", "effective_cost", "resource_id",
    "resource_name", "resource_type", "sku_id", "tags", "x_instance_type", "x_gpu_count",
    "x_gpu_model", "charge_category", "service_category", "list_cost", "contracted_cost",
    "consumed_quantity", "consumed_unit", "commitment_discount_id",
    "commitment_discount_status", "region_id",
    "provider_name", "billing_account_id",
    "sub_account_id", "service_name", "pricing_category", "billing_currency", "batch_id",
)  # fmt: skip


# A job between reading and team creation:
# (id, node names, start, end, GPU micros, GPU denominator, owner).
_StagedJob = tuple[int, tuple[str, ...], int, int | None, int, int, TeamRef | None]


def _jobs_queryset(first: dt.datetime, last: dt.datetime) -> models.QuerySet[JobRecord]:
    """The jobs that take part: started, holding GPUs, overlapping [first, last)."""
    return JobRecord.objects.filter(start__isnull=False, start__lt=last, gpus__gt=0).filter(
        Q(end__isnull=True) | Q(end__gt=first)
    )


def _job_node_names(first: dt.datetime, last: dt.datetime) -> tuple[set[str], int]:
    """Every node name the jobs ran on, and how many jobs, without loading the jobs: a part
    matches its line items against all of them (as the whole month does), then loads only
    the jobs that ran on its own nodes (inputs_load)."""
    names: set[str] = set()
    # The distinct JSON values (values_rows hands out one list each), kept alive so that their
    # ids are not reused.
    seen: dict[int, object] = {}
    count = 0
    queryset = _jobs_queryset(first, last).order_by().values_list("nodes")
    for (nodes,) in values_rows(queryset, ("nodes",), chunk_size=BATCH_SIZE):
        count += 1
        if id(nodes) not in seen:
            seen[id(nodes)] = nodes
            if isinstance(nodes, list):
                names.update(str(n) for n in nodes)
    return names, count


def _load_jobs(
    inputs: Inputs,
    resolver: TeamResolver,
    first: dt.datetime,
    last: dt.datetime,
    nodes: set[str] | None = None,
) -> list[_StagedJob]:
    """The jobs (nodes: only those that ran on one of these nodes), staged."""
    jobs = _jobs_queryset(first, last)
    if nodes is not None and connections[jobs.db].vendor == "postgresql":
        # jsonb ?| : any of the names is an element of the job's node list (checked again
        # below, where other databases filter alone).
        jobs = jobs.filter(nodes__has_any_keys=sorted(nodes))
    queryset = jobs.order_by("id").values_list(
        "id",
        "cluster",
        "job_id",
        "name",
        "account",
        "state",
        "start",
        "end",
        "gpus",
        "nodes",
        "run_id",
        "gpu_numerator",
        "gpu_denominator",
        "namespace",
        "labels",
        "endpoint",
    )
    staged: list[_StagedJob] = []
    # Charge basis `used`: jobs with a measured utilisation count GPUs x utilisation.
    utilisations = used_basis_utilisations()
    # Node lists and labels repeat (most jobs run on one node; pods share labels).
    node_tuples: dict[int, tuple[str, ...]] = {}
    wanted = nodes
    rows = values_rows(queryset, ("nodes", "labels"), chunk_size=BATCH_SIZE)
    for (pk, cluster, job_id, name, account, state, start, end, gpus, nodes, run_id,
         numerator, denominator, namespace, labels, endpoint) in rows:  # fmt: skip
        assert start is not None  # filtered above
        # _rows hands out one list per distinct JSON value: convert it once.
        node_names = node_tuples.get(id(nodes))
        if node_names is None:
            node_names = tuple(str(n) for n in nodes) if isinstance(nodes, list) else ()
            node_tuples[id(nodes)] = node_names
        if wanted is not None and wanted.isdisjoint(node_names):
            continue
        # MIG slices and time-sliced replicas are exact fractions (1/7 has no decimal form).
        exact = job_gpus_exact(gpus=gpus, numerator=numerator, denominator=denominator)
        # A run is the parser's run id; failing that the job name, failing that the job itself.
        inputs.job_meta[pk] = JobMeta(
            cluster, run_id or name or job_id, state, start, end, endpoint, job_id
        )
        labels = labels if isinstance(labels, dict) else {}
        ref = resolver.job_team(account=account, namespace=namespace, labels=labels)
        micros, gpu_denominator = exact.numerator * engine.GPU_SCALE, exact.denominator
        if utilisations:
            used = utilisations.get((cluster, job_id))
            if used is not None:
                inputs.requested_gpus[pk] = Fraction(micros, gpu_denominator * engine.GPU_SCALE)
                micros, gpu_denominator = charged_gpus(micros, gpu_denominator, used)
        staged.append((
            pk, node_names, _epoch(start), None if end is None else _epoch(end),
            micros, gpu_denominator, ref,
        ))  # fmt: skip
    return staged


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


def inputs_load(
    *, month: dt.date, part: ResourceRange | None = None, charges: ChargeSums | None = None
) -> tuple[Inputs, int]:
    """The month's engine inputs (month: its first day), or those of a part of its line items
    with the jobs that ran on the part's nodes (no other job can change the part's shares:
    engine.allocate_lines), and the number of line items read. charges: also sum the budget
    rollups of the line items read there (one read of the month instead of two)."""
    inputs = Inputs()
    resolver = TeamResolver.from_db()
    bounds = _charge_bounds(month)
    if bounds is None:
        return inputs, 0
    inputs.horizon = _epoch(bounds[1])
    whole = part is None or (part.first is None and part.stop is None)
    staged_jobs: list[_StagedJob] = []
    if whole:
        staged_jobs = _load_jobs(inputs, resolver, *bounds)
        names: Iterable[str] = (node for job in staged_jobs for node in job[1])
        inputs.month_jobs = len(staged_jobs)
    else:
        names, inputs.month_jobs = _job_node_names(*bounds)
    stager = _LineStager(resolver, engine.node_name_map(names), SharedRules.from_db(), charges)
    staged = stager.stage_all(
        values_rows(
            lines_queryset(month, epochs=True, part=part), _LINE_MEMOISED, chunk_size=BATCH_SIZE
        )
    )
    if not whole:
        part_nodes = {line[4] for line in staged if line[4] is not None}
        staged_jobs = _load_jobs(inputs, resolver, *bounds, nodes=part_nodes)
    # Node -> cluster is decided per node from all the jobs on it: a part has all of its nodes'.
    job_nodes = [(node, inputs.job_meta[job[0]].cluster) for job in staged_jobs for node in job[1]]
    idle_policies = IdlePolicies.from_db(node_clusters(job_nodes))
    inputs.dims = stager.dims()
    inputs.line_dims = stager.line_dims
    # Teams named by the month's rows but not created yet are created here, in one insert.
    resolver.materialise()
    inputs.lines = _engine_lines(inputs, staged, resolver, idle_policies, stager.commitment_pools)
    inputs.jobs = _engine_jobs(inputs, staged_jobs, resolver)
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

    def dims(self) -> list[Dims]:
        """The distinct ledger dimensions, in the order of the indexes in line_dims."""
        return list(self._dims_index)

    def stage_all(self, rows: Iterable[tuple[Any, ...]]) -> list[_Staged]:
        return [self.stage(row) for row in rows]

    def stage(self, row: tuple[Any, ...]) -> _Staged:
        (pk, start, end, cost, res_id, res_name, res_type, sku, tags, x_type, x_count, x_model,
         charge_category, service_category, list_cost, contracted_cost, quantity, unit,
         commitment_id, commitment_status, region, *dim_values) = row  # fmt: skip
        tags = tags if isinstance(tags, dict) else {}
        if self.charges is not None and (tags or charge_category in self._recurring):
            self.charges.add(
                self._datetime(start), self._datetime(end), dim_values[0], dim_values[5], cost,
                charge_category, dim_values[2], tags,
            )  # fmt: skip
        node, gpus = self.node_of_line(
            res_id, res_name, res_type, sku, tags, x_type, x_count, x_model
        )
        start_s, end_s = self._epoch(start), self._epoch(end)
        list_value, list_source = self.list_of_line(
            ListLine(
                charge_category, list_cost, cost, dim_values[0], x_type, region, quantity, unit,
                end_s - start_s,
            )
        )  # fmt: skip
        mix = pricing_mix(
            pricing_category=dim_values[4], sku_id=sku, commitment_discount_id=commitment_id
        )
        dims: Dims = (*dim_values, mix, list_source)  # type: ignore[assignment]
        self.line_dims[pk] = self._dims_index.setdefault(dims, len(self._dims_index))
        owner = self.resolver.line_team(tags=tags, sub_account=str(dims[2]))
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
            provider, _, sub, service = dims[:4]
            shared = self.shared_rules.match(
                provider=provider, sub_account=sub, service_category=service_category,
                service_name=service, charge_category=charge_category,
            )  # fmt: skip
        columns = (cost, list_value, contracted_cost or _ZERO)
        return (pk, start_s, end_s, columns, node, gpus, owner, shared, unused)

    def _epoch(self, value: dt.datetime | Decimal) -> int:
        seconds = self._epochs.get(value)
        if seconds is None:
            seconds = self._epochs[value] = _to_epoch(value)
        return seconds

    def _datetime(self, value: dt.datetime | Decimal) -> dt.datetime:
        found = self._datetimes.get(value)
        if found is None:
            found = self._datetimes[value] = _to_datetime(value)
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


def _engine_jobs(
    inputs: Inputs, staged_jobs: list[_StagedJob], resolver: TeamResolver
) -> list[engine.Job]:
    return [
        engine.Job(
            id=pk,
            nodes=nodes,
            start=start_s,
            end=end_s,
            gpu_micros=micros,
            team_id=resolver.team_id(ref),
            gpu_denominator=denominator,
            requested_gpus=inputs.requested_gpus.get(pk),
            # A pod serving an inference endpoint is inference spend, any other job training.
            category=engine.INFERENCE if inputs.job_meta[pk].endpoint else engine.TRAINING,
        )
        for pk, nodes, start_s, end_s, micros, denominator, ref in staged_jobs
    ]
