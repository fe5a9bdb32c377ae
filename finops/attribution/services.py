"""Attribution for a billing month: load inputs, run the engine, write the ledger and rollups.

Which rows take part:
- Line items whose billing_period is the month (the invoice they appear on, DESIGN section 4),
  from SUCCEEDED import batches only: while a restatement is being imported its rows sit beside
  the old batch's, and counting both would double the month.
- Jobs that started (start not null), hold GPUs, and overlap [earliest charge period start,
  latest charge period end) of those line items.

The ledger keeps one row per (day, category, team, job, node, provider, billing account,
sub-account, service, pricing category, currency, source batch): sums of shares that were
already rounded per line item, so every sum over it is exact.
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db import InterfaceError, OperationalError, connection, connections, models, transaction
from django.db.models import F, Func, Max, Min, Q
from django.db.models.sql.constants import MULTI
from django.utils import timezone

from billing_ingest.faults import fault_point
from billing_ingest.heartbeat import dead_worker_message, heartbeat, heartbeat_deadline
from billing_ingest.models import CostLineItem, ImportBatch, JobRecord, job_gpus_exact
from billing_ingest.money import MoneyField, MoneySum
from finops.attribution import engine
from finops.attribution.catalogue import line_gpu_spec
from finops.attribution.charge_basis import charged_gpus, used_basis_utilisations
from finops.attribution.list_cost import (
    ESTIMATED_SOURCES,
    MIX_KINDS,
    ListCostResolver,
    ListLine,
    pricing_mix,
)
from finops.attribution.models import (
    AllocatedCost,
    AttributionRun,
    Category,
    RunCost,
    TeamDailyCost,
)
from finops.attribution.policies import (
    CommitmentPools,
    IdlePolicies,
    SharedRules,
    is_unused_commitment,
    node_clusters,
)
from finops.attribution.team_mapping import TeamRef, TeamResolver
from finops.attribution.waste import WASTE_STATES, ServingPod, pods_that_served

logger = logging.getLogger(__name__)

BATCH_SIZE = 5000
_GPU_SECONDS_QUANTUM = Decimal("0.000001")
# Page cache while inserting the ledger on SQLite, in the negative-KiB form of the pragma
# (256 MiB at most; SQLite allocates it only as pages are used).
_SQLITE_INSERT_CACHE_KIB = -256 * 1024
_EPOCH = dt.date(1970, 1, 1)

# Dimensions of a line item copied onto its ledger rows. (provider, account, sub-account,
# service, pricing category, currency, batch id, pricing mix, on-demand equivalent's source)
_Dims = tuple[str, str, str, str, str, str, int, str, str]


@dataclass(slots=True)
class _JobMeta:
    cluster: str
    run_id: str
    state: str
    start: dt.datetime
    end: dt.datetime | None
    # The inference endpoint a pod serves (its GPU cost is `inference`), else "".
    endpoint: str = ""
    job_id: str = ""


@dataclass(slots=True)
class _Inputs:
    lines: list[engine.LineItem] = field(default_factory=list)
    line_dims: dict[int, int] = field(default_factory=dict)  # line id -> index in dims
    dims: list[_Dims] = field(default_factory=list)
    jobs: list[engine.Job] = field(default_factory=list)
    job_meta: dict[int, _JobMeta] = field(default_factory=dict)
    # Jobs charged for less than they requested (charge basis `used`): job id -> requested GPUs.
    requested_gpus: dict[int, Fraction] = field(default_factory=dict)


def month_start(value: dt.date) -> dt.date:
    return value.replace(day=1)


def parse_month(text: str) -> dt.date:
    """'YYYY-MM' -> first day of that month; ValueError otherwise."""
    try:
        return dt.datetime.strptime(text.strip(), "%Y-%m").date()
    except ValueError:
        raise ValueError(f"month must be YYYY-MM, not {text!r}") from None


def _epoch(value: dt.datetime) -> int:
    return int(value.timestamp())


def _to_epoch(value: dt.datetime | Decimal) -> int:
    """A datetime, or epoch seconds as read by _lines_queryset(epochs=True), as _epoch gives
    it (int() truncates toward zero, as int(timestamp()) does)."""
    return _epoch(value) if isinstance(value, dt.datetime) else int(value)


def _lines_queryset(month: dt.date, *, epochs: bool = False) -> models.QuerySet[Any]:
    """The month's line items as value tuples (unevaluated; _rows reads it).

    epochs: on PostgreSQL, read the charge period as epoch seconds computed by the server.
    Django's timestamptz loader is Python code run for every cell, before any memoisation can
    help; SQLite hands out text, which _rows converts once per distinct hour."""
    queryset = CostLineItem.objects.filter(
        billing_period=month, batch__status=ImportBatch.Status.SUCCEEDED
    ).order_by("id")
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


def _rows(queryset: models.QuerySet[Any], memoised: Iterable[str]) -> Iterator[tuple[Any, ...]]:
    """The value tuples of a values_list queryset, as the ORM would convert them, read in
    chunks; the columns named in memoised are converted once per distinct database value.

    Charge periods repeat (744 hours a month over hundreds of thousands of lines) and so do
    tags, while the ORM converts every cell (on SQLite: parse the datetime text, make it aware,
    json.loads the tags): for a month's line items that alone cost more than reading them."""
    compiler = queryset.query.get_compiler(using=queryset.db)
    # As QuerySet.iterator(): a server-side cursor on PostgreSQL unless settings disable them.
    chunked = not compiler.connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    results = compiler.execute_sql(MULTI, chunked_fetch=chunked, chunk_size=BATCH_SIZE)
    assert results is not None
    selected = compiler.select[: compiler.col_count]
    # Column names in the compiler's order (the aliases it selects them as), then the order
    # values_list asked for.
    names = [alias for _, _, alias in selected]
    if None in names:
        query = queryset.query
        names = [*query.extra_select, *query.values_select, *query.annotation_select]
    wanted = list(queryset._fields or names)  # type: ignore[attr-defined]
    order = [names.index(name) for name in wanted]
    reorder = order != list(range(len(order)))
    fields = [expression for expression, _, _ in selected]
    converters = compiler.get_converters(fields)
    connection = compiler.connection
    memo_at = {names.index(name) for name in memoised if name in names}
    plain: list[tuple[int, list[Any], Any]] = []
    cached: list[tuple[int, list[Any], Any, dict[Any, Any]]] = []
    for pos, (convs, expression) in converters.items():
        if pos in memo_at:
            cached.append((pos, convs, expression, {}))
        else:
            plain.append((pos, convs, expression))
    for chunk in results:
        for raw in chunk:
            row = list(raw)
            for pos, convs, expression in plain:
                value = row[pos]
                for convert in convs:
                    value = convert(value, expression, connection)
                row[pos] = value
            for pos, convs, expression, memo in cached:
                value = row[pos]
                try:
                    row[pos] = memo[value]
                    continue
                except KeyError:
                    keep = True
                except TypeError:  # an unhashable raw value (a driver that decodes JSON)
                    keep = False
                converted = value
                for convert in convs:
                    converted = convert(converted, expression, connection)
                row[pos] = converted
                if keep:
                    memo[value] = converted
            yield tuple([row[i] for i in order]) if reorder else tuple(row)


# A job between reading and team creation:
# (id, node names, start, end, GPU micros, GPU denominator, owner).
_StagedJob = tuple[int, tuple[str, ...], int, int | None, int, int, TeamRef | None]


def _load_jobs(
    inputs: _Inputs, resolver: TeamResolver, first: dt.datetime, last: dt.datetime
) -> list[_StagedJob]:
    queryset = (
        JobRecord.objects.filter(start__isnull=False, start__lt=last, gpus__gt=0)
        .filter(Q(end__isnull=True) | Q(end__gt=first))
        .order_by("id")
        .values_list(
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
    )
    staged: list[_StagedJob] = []
    # Charge basis `used`: jobs with a measured utilisation count GPUs x utilisation.
    utilisations = used_basis_utilisations()
    # Node lists and labels repeat (most jobs run on one node; pods share labels).
    node_tuples: dict[int, tuple[str, ...]] = {}
    rows = _rows(queryset, ("nodes", "labels"))
    for (pk, cluster, job_id, name, account, state, start, end, gpus, nodes, run_id,
         numerator, denominator, namespace, labels, endpoint) in rows:  # fmt: skip
        assert start is not None  # filtered above
        # _rows hands out one list per distinct JSON value: convert it once.
        node_names = node_tuples.get(id(nodes))
        if node_names is None:
            node_names = tuple(str(n) for n in nodes) if isinstance(nodes, list) else ()
            node_tuples[id(nodes)] = node_names
        # MIG slices and time-sliced replicas are exact fractions (1/7 has no decimal form).
        exact = job_gpus_exact(gpus=gpus, numerator=numerator, denominator=denominator)
        # A run is the parser's run id; failing that the job name, failing that the job itself.
        inputs.job_meta[pk] = _JobMeta(
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


def _load(month: dt.date) -> tuple[_Inputs, int]:
    inputs = _Inputs()
    resolver = TeamResolver.from_db()
    bounds = CostLineItem.objects.filter(
        billing_period=month, batch__status=ImportBatch.Status.SUCCEEDED
    ).aggregate(first=Min("charge_period_start"), last=Max("charge_period_end"))
    if bounds["first"] is None:
        return inputs, 0
    staged_jobs = _load_jobs(inputs, resolver, bounds["first"], bounds["last"])
    names = engine.node_name_map(n for job in staged_jobs for n in job[1])

    idle_policies = IdlePolicies.from_db(
        node_clusters(
            (node, inputs.job_meta[job[0]].cluster) for job in staged_jobs for node in job[1]
        )
    )
    shared_rules = SharedRules.from_db()
    node_of_line = _NodeOfLine(names)
    commitment_pools = CommitmentPools()
    list_of_line = ListCostResolver()
    staged: list[_Staged] = []
    dims_index: dict[_Dims, int] = {}
    epochs: dict[Any, int] = {}
    memoised = ("charge_period_start", "charge_period_end", "tags")
    for row in _rows(_lines_queryset(month, epochs=True), memoised):
        (pk, start, end, cost, res_id, res_name, res_type, sku, tags, x_type, x_count, x_model,
         charge_category, service_category, list_cost, contracted_cost, quantity, unit,
         commitment_id, commitment_status, region, *dim_values) = row  # fmt: skip
        tags = tags if isinstance(tags, dict) else {}
        node, gpus = node_of_line(res_id, res_name, res_type, sku, tags, x_type, x_count, x_model)
        start_s = epochs.get(start)
        if start_s is None:
            start_s = epochs[start] = _to_epoch(start)
        end_s = epochs.get(end)
        if end_s is None:
            end_s = epochs[end] = _to_epoch(end)
        list_value, list_source = list_of_line(
            ListLine(
                charge_category, list_cost, cost, dim_values[0], x_type, region, quantity, unit,
                end_s - start_s,
            )
        )  # fmt: skip
        mix = pricing_mix(
            pricing_category=dim_values[4], sku_id=sku, commitment_discount_id=commitment_id
        )
        dims: _Dims = (*dim_values, mix, list_source)  # type: ignore[assignment]
        inputs.line_dims[pk] = dims_index.setdefault(dims, len(dims_index))
        owner = resolver.line_team(tags=tags, sub_account=str(dims[2]))
        unused = None
        if is_unused_commitment(commitment_status):
            # Capacity bought and not used is no node's usage, even when it names a GPU type.
            node, gpus, unused = None, None, (commitment_id, dim_values[0], x_type)
        elif node is not None:
            commitment_pools.add_node_line(
                node=node, commitment_id=commitment_id, provider=dim_values[0], instance_type=x_type
            )
        shared = None
        if node is None and unused is None and owner is None and shared_rules:
            provider, _, sub, service = dims[:4]
            shared = shared_rules.match(
                provider=provider, sub_account=sub, service_category=service_category,
                service_name=service, charge_category=charge_category,
            )  # fmt: skip
        columns = (cost, list_value, contracted_cost or _ZERO)
        staged.append((pk, start_s, end_s, columns, node, gpus, owner, shared, unused))
    inputs.dims = list(dims_index)

    resolver.materialise()
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
        inputs.lines.append(
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
    inputs.jobs = [
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
    return inputs, len(staged)


def _day(day: int, cache: dict[int, dt.date]) -> dt.date:
    if day not in cache:
        cache[day] = _EPOCH + dt.timedelta(days=day)
    return cache[day]


# Ledger key: (dims index, day, category, team id, job id, node).
_LedgerKey = tuple[int, int, str, int | None, int | None, str]
# Ledger value: [units of 10^-12, GPU-seconds, list units, contracted units]; after _finish the
# GPU-seconds are quantised.
_Ledger = dict[_LedgerKey, list[Any]]


def _aggregate(inputs: _Inputs, shares: list[engine.Share]) -> _Ledger:
    ledger: _Ledger = {}
    line_dims = inputs.line_dims
    for share in shares:
        key = (
            line_dims[share.line_id], share.day, share.category, share.team_id, share.job_id,
            share.node,
        )  # fmt: skip
        acc = ledger.get(key)
        if acc is None:
            ledger[key] = [share.units, share.gpu_seconds, share.list_units, share.contracted_units]
        else:
            acc[0] += share.units
            if share.gpu_seconds:
                acc[1] += share.gpu_seconds
            acc[2] += share.list_units
            acc[3] += share.contracted_units
    return _finish(ledger)


def _finish(ledger: _Ledger) -> _Ledger:
    """Drop rows worth nothing (zero-cost lines, zero idle) and quantise GPU-seconds as stored,
    so the rollups sum exactly what the ledger rows hold."""
    finished: _Ledger = {}
    quantum = _GPU_SECONDS_QUANTUM
    for key, (units, seconds, list_units, contracted_units) in ledger.items():
        if units == 0 and not seconds and not list_units and not contracted_units:
            continue
        quantised = Decimal(seconds).quantize(quantum) if seconds else _ZERO
        finished[key] = [units, quantised, list_units, contracted_units]
    return finished


# Columns of AllocatedCost written by _insert, in the order _ledger_values yields them.
_LEDGER_COLUMNS = (
    "billing_period", "day", "category", "team_id", "job_id", "run_id", "node", "provider_name",
    "billing_account_id", "sub_account_id", "service_name", "pricing_category",
    "billing_currency", "amount", "gpu_seconds", "source_batch_id", "pricing_mix",
    "list_cost_source", "list_cost", "contracted_cost",
)  # fmt: skip


def _ledger_values(month: dt.date, inputs: _Inputs, ledger: _Ledger) -> Iterator[tuple[Any, ...]]:
    days: dict[int, dt.date] = {}
    job_meta = inputs.job_meta
    dims = inputs.dims
    to_decimal = engine.units_to_decimal
    for (dims_i, day, category, team_id, job_id, node), values in ledger.items():
        units, seconds, list_units, contracted_units = values
        provider, account, sub, service, pricing, currency, batch_id, mix, source = dims[dims_i]
        yield (
            month, _day(day, days), category, team_id, job_id,
            job_meta[job_id].run_id if job_id is not None else "", node, provider, account, sub,
            service, pricing, currency, to_decimal(units), seconds, batch_id, mix, source,
            to_decimal(list_units), to_decimal(contracted_units),
        )  # fmt: skip


def _insert(
    model: type[models.Model], columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]]
) -> None:
    """Insert plain value tuples: COPY on PostgreSQL, executemany on SQLite. Model instances and
    bulk_create cost ten times more per row, and the ledger has a row per job, node and day.
    The values are what the fields would send (Decimal, date, int, str, None); both drivers
    adapt them as Django does."""
    connection = transaction.get_connection()
    quote = connection.ops.quote_name
    fields = {f.attname: f.column for f in model._meta.concrete_fields}
    names = ", ".join(quote(fields[c]) for c in columns)
    table = quote(model._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        statement = f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"
        # SQLite's default page cache (2 MB) is far smaller than the table and its indexes, so
        # every insert pages index blocks in and out; a larger cache for this insert only.
        cursor.execute("PRAGMA cache_size")
        (cache_size,) = cursor.fetchone()
        cursor.execute(f"PRAGMA cache_size = {_SQLITE_INSERT_CACHE_KIB}")
        try:
            batch: list[tuple[Any, ...]] = []
            for row in rows:
                batch.append(row)
                if len(batch) == BATCH_SIZE:
                    cursor.executemany(statement, batch)
                    batch = []
            if batch:
                cursor.executemany(statement, batch)
        finally:
            cursor.execute(f"PRAGMA cache_size = {int(cache_size)}")


def _insert_instances(model: type[models.Model], instances: list[Any]) -> None:
    """Unsaved model instances through _insert: each field's own database value (text money
    and naive UTC datetimes on SQLite), at a fraction of bulk_create's cost per row."""
    connection = transaction.get_connection()
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = tuple(f.attname for f in fields)
    # Money values here come from units_to_decimal (exact, 12 places), which both drivers take
    # as they are (the ledger's amounts go the same way); DecimalField's own preparation
    # re-quantises each in a fresh context, and the rollups have a dozen money columns.
    plain = [isinstance(f, MoneyField) for f in fields]
    rows = (
        tuple(
            value
            if is_plain and isinstance(value := getattr(instance, f.attname), Decimal)
            else f.get_db_prep_save(getattr(instance, f.attname), connection)
            for f, is_plain in zip(fields, plain, strict=True)
        )
        for instance in instances
    )
    _insert(model, columns, rows)


# Rollup columns accumulated from ledger rows, in 10^-12 units (GPU-seconds as Decimal):
# [cost, GPU-seconds, on-demand equivalent, contracted, estimated on-demand, mix by MIX_KINDS...]
_MIX_AT = {kind: 5 + i for i, kind in enumerate(MIX_KINDS)}


def _rollup_add(acc: list[Any], dims: _Dims, values: list[Any]) -> None:
    units, seconds, list_units, contracted_units = values
    acc[0] += units
    if seconds:
        acc[1] += seconds
    acc[2] += list_units
    acc[3] += contracted_units
    if dims[8] in ESTIMATED_SOURCES:
        acc[4] += list_units
    acc[_MIX_AT[dims[7]]] += units


def _rollup_fields(acc: list[Any]) -> dict[str, Any]:
    to_decimal = engine.units_to_decimal
    return {
        "gpu_seconds": acc[1],
        "list_cost": to_decimal(acc[2]),
        "contracted_cost": to_decimal(acc[3]),
        "list_cost_estimated": to_decimal(acc[4]),
        **{f"cost_{kind}": to_decimal(acc[_MIX_AT[kind]]) for kind in MIX_KINDS},
    }


def _new_rollup() -> list[Any]:
    return [0, _ZERO, 0, 0, 0, *([0] * len(MIX_KINDS))]


def _team_daily_rows(month: dt.date, inputs: _Inputs, ledger: _Ledger) -> list[TeamDailyCost]:
    sums: dict[tuple[Any, ...], list[Any]] = {}
    dims = inputs.dims
    for (dims_i, day, category, team_id, _, _), values in ledger.items():
        row_dims = dims[dims_i]
        key = (day, team_id, category, row_dims[0], row_dims[5])
        acc = sums.get(key)
        if acc is None:
            acc = sums[key] = _new_rollup()
        _rollup_add(acc, row_dims, values)
    days: dict[int, dt.date] = {}
    return [
        TeamDailyCost(
            billing_period=month,
            day=_day(day, days),
            team_id=team_id,
            category=category,
            provider_name=provider,
            billing_currency=currency,
            amount=engine.units_to_decimal(acc[0]),
            **_rollup_fields(acc),
        )
        for (day, team_id, category, provider, currency), acc in sums.items()
    ]


@dataclass(slots=True)
class _RunAcc:
    columns: list[Any] = field(default_factory=_new_rollup)
    wasted: int = 0
    jobs: set[int] = field(default_factory=set)


def _run_rows(month: dt.date, inputs: _Inputs, ledger: _Ledger) -> list[RunCost]:
    """RunCost per (team, run, cluster, currency) from the job rows of the ledger: a run's jobs,
    counts and times are those that have billed GPU time in the month. Cost includes idle spread
    onto the run's jobs (the `spread` idle policy): the run's fully loaded cost."""
    runs: dict[tuple[int | None, str, str, str], _RunAcc] = {}
    wasted_jobs = _wasted_jobs(inputs, {key[4] for key in ledger if key[4] is not None})
    for (dims_i, _, _, team_id, job_id, _), values in ledger.items():
        if job_id is None:
            continue
        meta = inputs.job_meta[job_id]
        row_dims = inputs.dims[dims_i]
        key = (team_id, meta.run_id, meta.cluster, row_dims[5])
        acc = runs.get(key)
        if acc is None:
            acc = runs[key] = _RunAcc()
        _rollup_add(acc.columns, row_dims, values)
        if job_id in wasted_jobs:
            acc.wasted += values[0]
        acc.jobs.add(job_id)
    result = []
    for (team_id, run_id, cluster, currency), acc in runs.items():
        metas = [inputs.job_meta[j] for j in sorted(acc.jobs)]
        ends = [m.end for m in metas if m.end is not None]
        result.append(
            RunCost(
                billing_period=month,
                team_id=team_id,
                run_id=run_id,
                cluster=cluster,
                category=_run_category(metas),
                billing_currency=currency,
                cost=engine.units_to_decimal(acc.columns[0]),
                wasted_cost=engine.units_to_decimal(acc.wasted),
                jobs=len(metas),
                failed_jobs=sum(1 for m in metas if m.state in WASTE_STATES),
                running_jobs=sum(1 for m in metas if m.end is None or m.state == "RUNNING"),
                first_start=min(m.start for m in metas),
                last_end=max(ends) if ends else None,
                **_rollup_fields(acc.columns),
            )
        )
    return result


def _run_category(metas: list[_JobMeta]) -> str:
    """A run whose pods serve an endpoint is inference, not a training run."""
    return Category.INFERENCE if any(m.endpoint for m in metas) else Category.TRAINING


def _wasted_jobs(inputs: _Inputs, job_ids: set[int]) -> set[int]:
    """Jobs in a waste state, less the serving pods that answered requests before they ended."""
    failed = {j for j in job_ids if inputs.job_meta[j].state in WASTE_STATES}
    serving = {
        j: ServingPod(meta.endpoint, meta.job_id, meta.start, meta.end)
        for j in failed
        if (meta := inputs.job_meta[j]).endpoint
    }
    return failed - pods_that_served(serving)


class ConservationError(RuntimeError):
    """The ledger about to be written does not add up to the bill (a bug, never data)."""


def _check_conservation(inputs: _Inputs, ledger: _Ledger) -> None:
    """Exact check in memory before writing: per provider, account and currency, the ledger's
    sum of each column (EffectiveCost, on-demand equivalent, ContractedCost) equals the line
    items'. A failure is a bug; the run fails and the month keeps its previous rows rather
    than get a ledger that does not add up."""
    columns = range(3)
    billed: dict[tuple[str, str, str, int], int] = {}
    to_units = engine.decimal_to_units
    for line in inputs.lines:
        dims = inputs.dims[inputs.line_dims[line.id]]
        amounts = (line.cost, line.list_cost, line.contracted_cost)
        for column in columns:
            key = (dims[0], dims[1], dims[5], column)
            billed[key] = billed.get(key, 0) + to_units(amounts[column])
    by_dims: dict[int, list[int]] = {}
    for ledger_key, values in ledger.items():
        acc = by_dims.setdefault(ledger_key[0], [0, 0, 0])
        acc[0] += values[0]
        acc[1] += values[2]
        acc[2] += values[3]
    allocated: dict[tuple[str, str, str, int], int] = {}
    for dims_i, sums in by_dims.items():
        dims = inputs.dims[dims_i]
        for column in columns:
            key = (dims[0], dims[1], dims[5], column)
            allocated[key] = allocated.get(key, 0) + sums[column]
    billed = {k: v for k, v in billed.items() if v}
    allocated = {k: v for k, v in allocated.items() if v}
    if billed != allocated:
        raise ConservationError(f"ledger {allocated} != bill {billed} (in 10^-12 units)")


def _write(month: dt.date, inputs: _Inputs) -> None:
    shares = engine.attribute(inputs.lines, inputs.jobs)
    ledger = _aggregate(inputs, shares)
    del shares
    _check_conservation(inputs, ledger)
    daily_rows = _team_daily_rows(month, inputs, ledger)
    run_rows = _run_rows(month, inputs, ledger)
    AllocatedCost.objects.filter(billing_period=month).delete()
    TeamDailyCost.objects.filter(billing_period=month).delete()
    RunCost.objects.filter(billing_period=month).delete()
    _insert(AllocatedCost, _LEDGER_COLUMNS, _ledger_values(month, inputs, ledger))
    _insert_instances(TeamDailyCost, daily_rows)
    _insert_instances(RunCost, run_rows)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a month is attributed. The run allocates millions of
    small tuples that all live until it ends; the collector would keep rescanning them (a third
    of the engine's time, growing faster than the month) and find nothing to free. Plain
    reference counting still frees everything; the collector resumes afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def attribution_run(*, month: dt.date) -> AttributionRun:
    """Attribute a billing month: replace its ledger and rollups in one transaction.

    Idempotent (same inputs, same rows). On error the run is recorded FAILED with the message,
    the month's previous rows stay as they were, and the error is re-raised. Runs of the month
    left RUNNING by a dead worker (no heartbeat) are marked FAILED first.
    """
    month = month_start(month)
    attribution_runs_fail_dead(month=month)
    run = AttributionRun.objects.create(billing_period=month, heartbeat_at=timezone.now())
    try:
        with heartbeat(lambda: _touch(run.pk)), transaction.atomic():
            _lock_month(month)
            AttributionRun.objects.filter(pk=run.pk).update(inputs_at=timezone.now())
            with _gc_paused():
                inputs, line_count = _load(month)
                fault_point("attribute")
                _write(month, inputs)
            run.status = AttributionRun.Status.SUCCEEDED
            run.line_items = line_count
            run.jobs = len(inputs.jobs)
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "line_items", "jobs", "finished_at"])
    except Exception as exc:
        logger.exception("attribution of %s failed", month)
        if isinstance(exc, OperationalError | InterfaceError) and not connection.in_atomic_block:
            connection.close()  # dropped: record the failure on a fresh connection
        AttributionRun.objects.filter(pk=run.pk, status=AttributionRun.Status.RUNNING).update(
            status=AttributionRun.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
        )
        run.refresh_from_db()
        raise
    return run


def _touch(run_id: int) -> None:
    AttributionRun.objects.filter(pk=run_id, status=AttributionRun.Status.RUNNING).update(
        heartbeat_at=timezone.now()
    )


def _lock_month(month: dt.date) -> None:
    """Serialise runs of one month: a second run waits here until the first commits, then
    deletes its rows instead of inserting beside them. An advisory lock rather than a lock on
    the runs' rows, so the heartbeat thread can still touch this run's row while it waits.
    SQLite serialises every write transaction already."""
    if connection.vendor != "postgresql":
        return
    key = int.from_bytes(hashlib.sha256(f"attribution:{month}".encode()).digest()[:8], "big")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key - 2**63])


def attribution_runs_fail_dead(*, month: dt.date | None = None) -> list[int]:
    """Mark FAILED the RUNNING runs (of one month, or all) whose worker stopped its heartbeat.
    Their transaction died with the worker: the month kept its previous ledger."""
    runs = AttributionRun.objects.filter(
        status=AttributionRun.Status.RUNNING, heartbeat_at__lt=heartbeat_deadline()
    )
    if month is not None:
        runs = runs.filter(billing_period=month_start(month))
    failed: list[int] = []
    for run_id, last in runs.values_list("id", "heartbeat_at"):
        updated = AttributionRun.objects.filter(
            pk=run_id, status=AttributionRun.Status.RUNNING, heartbeat_at=last
        ).update(
            status=AttributionRun.Status.FAILED,
            error=dead_worker_message(last),
            finished_at=timezone.now(),
        )
        if updated:
            logger.warning("attribution run %s failed: its worker died", run_id)
            failed.append(run_id)
    return failed


# Reads used by the command's summary (kept here, next to what they check).
# MoneySum is exact on both databases (a Decimal aggregate on SQLite, numeric SUM on PostgreSQL).


def _exact_sums(queryset: Any, keys: tuple[str, ...], value: str) -> dict[tuple[Any, ...], Decimal]:
    rows = queryset.values_list(*keys).annotate(total=MoneySum(value)).order_by()
    return {tuple(key): total or Decimal(0) for *key, total in rows}


def month_category_totals(*, month: dt.date) -> dict[tuple[str, str], Decimal]:
    """(currency, category) -> allocated amount for the month."""
    sums = _exact_sums(
        AllocatedCost.objects.filter(billing_period=month_start(month)),
        ("billing_currency", "category"),
        "amount",
    )
    return dict(sorted(sums.items()))  # type: ignore[arg-type]


def month_conservation(*, month: dt.date) -> dict[tuple[str, str, str], dict[str, Decimal]]:
    """(provider, billing account, currency) -> billed (sum of EffectiveCost of the month's
    succeeded line items), allocated (sum of the ledger) and difference (allocated - billed)."""
    month = month_start(month)
    keys = ("provider_name", "billing_account_id", "billing_currency")
    billed = _exact_sums(
        CostLineItem.objects.filter(
            billing_period=month, batch__status=ImportBatch.Status.SUCCEEDED
        ),
        keys,
        "effective_cost",
    )
    allocated = _exact_sums(AllocatedCost.objects.filter(billing_period=month), keys, "amount")
    zero = Decimal(0)
    result: dict[tuple[str, str, str], dict[str, Decimal]] = {}
    for key in sorted(set(billed) | set(allocated)):
        b, a = billed.get(key, zero), allocated.get(key, zero)
        result[key] = {"billed": b, "allocated": a, "difference": a - b}  # type: ignore[index]
    return result
