"""The attribution ledger of a month: shares aggregated into AllocatedCost rows, checked against
the bill, rolled up into TeamDailyCost and RunCost, and written (COPY on PostgreSQL).

The ledger keeps one row per (day, category, team, job, node, provider, billing account,
sub-account, service, pricing category, currency, source batch): sums of shares that were
already rounded per line item, so every sum over it is exact.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import models, transaction

from billing_ingest.money import MoneyField
from finops.attribution import engine
from finops.attribution.charge_rollups import ChargeSums, charge_rollups
from finops.attribution.inputs import BATCH_SIZE, Dims, Inputs, JobMeta
from finops.attribution.list_cost import ESTIMATED_SOURCES, MIX_KINDS
from finops.attribution.models import (
    AllocatedCost,
    Category,
    RecurringCharge,
    RunCost,
    TagCharge,
    TeamDailyCost,
)
from finops.attribution.partitions import ledger_month_clear
from finops.attribution.run_ids import RunIdCollisionError, run_cost_id
from finops.attribution.waste import WASTE_STATES, ServingPod, pods_that_served

_GPU_SECONDS_QUANTUM = Decimal("0.000001")
# Page cache while inserting the ledger on SQLite, in the negative-KiB form of the pragma
# (256 MiB at most; SQLite allocates it only as pages are used).
_SQLITE_INSERT_CACHE_KIB = -256 * 1024
_EPOCH = dt.date(1970, 1, 1)
_ZERO = Decimal(0)


def _day(day: int, cache: dict[int, dt.date]) -> dt.date:
    if day not in cache:
        cache[day] = _EPOCH + dt.timedelta(days=day)
    return cache[day]


# Ledger key: (dims index, day, category, team id, job id, node).
LedgerKey = tuple[int, int, str, int | None, int | None, str]
# Ledger value: [units of 10^-12, GPU-seconds, list units, contracted units]; after finish the
# GPU-seconds are quantised.
Ledger = dict[LedgerKey, list[Any]]


def finish(ledger: Ledger) -> Ledger:
    """Drop rows worth nothing (zero-cost lines, zero idle) and quantise GPU-seconds as stored,
    so the rollups sum exactly what the ledger rows hold."""
    finished: Ledger = {}
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


def _ledger_values(month: dt.date, inputs: Inputs, ledger: Ledger) -> Iterator[tuple[Any, ...]]:
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


def _insert_instances(
    model: type[models.Model], instances: list[Any], *, with_pk: bool = False
) -> None:
    """Unsaved model instances through _insert: each field's own database value (text money
    and naive UTC datetimes on SQLite), at a fraction of bulk_create's cost per row.
    `with_pk`: the instances carry their ids (RunCost's stable ids), else the database's."""
    connection = transaction.get_connection()
    fields = [f for f in model._meta.concrete_fields if with_pk or not f.primary_key]
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


def _rollup_add(acc: list[Any], dims: Dims, values: list[Any]) -> None:
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


def _team_daily_rows(month: dt.date, inputs: Inputs, ledger: Ledger) -> list[TeamDailyCost]:
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


def _run_rows(month: dt.date, inputs: Inputs, ledger: Ledger) -> list[RunCost]:
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
    ids: dict[int, tuple[int | None, str, str, str]] = {}
    for (team_id, run_id, cluster, currency), acc in runs.items():
        metas = [inputs.job_meta[j] for j in sorted(acc.jobs)]
        ends = [m.end for m in metas if m.end is not None]
        result.append(
            RunCost(
                id=_run_id(ids, month, (team_id, run_id, cluster, currency)),
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


def _run_id(
    ids: dict[int, tuple[int | None, str, str, str]],
    month: dt.date,
    key: tuple[int | None, str, str, str],
) -> int:
    """The run's stable id (run_ids.py); two runs of the month with one id are refused."""
    team_id, run_id, cluster, currency = key
    pk = run_cost_id(
        month=month, team_id=team_id, cluster=cluster, currency=currency, run_id=run_id
    )
    other = ids.setdefault(pk, key)
    if other != key:
        raise RunIdCollisionError(f"runs {other} and {key} of {month:%Y-%m} share the id {pk}")
    return pk


def _run_category(metas: list[JobMeta]) -> str:
    """A run whose pods serve an endpoint is inference, not a training run."""
    return Category.INFERENCE if any(m.endpoint for m in metas) else Category.TRAINING


def _wasted_jobs(inputs: Inputs, job_ids: set[int]) -> set[int]:
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


# (provider, account, currency, column) -> units; columns: cost, on-demand equivalent, contracted.
Bill = dict[tuple[str, str, str, int], int]


def check_conservation(bill: Bill, dims: list[Dims], ledger: Ledger) -> None:
    """Exact check in memory before writing: per provider, account and currency, the ledger's
    sum of each column (EffectiveCost, on-demand equivalent, ContractedCost) equals the line
    items' (bill). A failure is a bug; the run fails and the month keeps its previous rows
    rather than get a ledger that does not add up."""
    by_dims: dict[int, list[int]] = {}
    for ledger_key, values in ledger.items():
        acc = by_dims.setdefault(ledger_key[0], [0, 0, 0])
        acc[0] += values[0]
        acc[1] += values[2]
        acc[2] += values[3]
    allocated: dict[tuple[str, str, str, int], int] = {}
    for dims_i, sums in by_dims.items():
        row_dims = dims[dims_i]
        for column in range(3):
            key = (row_dims[0], row_dims[1], row_dims[5], column)
            allocated[key] = allocated.get(key, 0) + sums[column]
    billed = {k: v for k, v in bill.items() if v}
    allocated = {k: v for k, v in allocated.items() if v}
    if billed != allocated:
        raise ConservationError(f"ledger {allocated} != bill {billed} (in 10^-12 units)")


def write(
    month: dt.date, inputs: Inputs, ledger: Ledger, *, charges: ChargeSums | None = None
) -> None:
    """Replace the month's ledger and rollups (inside the caller's transaction), the budgets'
    rollups of its line items included: charges, summed while the month's line items were
    read, else read now (charge_rollups)."""
    daily_rows = _team_daily_rows(month, inputs, ledger)
    run_rows = _run_rows(month, inputs, ledger)
    recurring_rows, tag_rows = charges.rows(month) if charges is not None else charge_rollups(month)
    ledger_month_clear(month=month)
    for rollup in (TeamDailyCost, RunCost, RecurringCharge, TagCharge):
        rollup.objects.filter(billing_period=month).delete()
    _insert(AllocatedCost, _LEDGER_COLUMNS, _ledger_values(month, inputs, ledger))
    _insert_instances(TeamDailyCost, daily_rows)
    _insert_instances(RunCost, run_rows, with_pk=True)
    _insert_instances(RecurringCharge, recurring_rows)
    _insert_instances(TagCharge, tag_rows)
