"""The attribution ledger of a month: shares aggregated into AllocatedCost rows, checked against
the bill, rolled up into TeamDailyCost and RunCost, and written (COPY on PostgreSQL).

The ledger keeps one row per (day, category, team, job, node, provider, billing account,
sub-account, service, pricing category, currency, source batch): sums of shares that were
already rounded per line item, so every sum over it is exact.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any

from django.db import models, transaction

from finops.attribution import engine
from finops.attribution.engine.run_ids import RunIdCollisionError, run_cost_id
from finops.attribution.engine.waste import ServingPod, in_waste_state, pods_that_served
from finops.attribution.inputs.charge_rollups import ChargeSums, charge_rollups
from finops.attribution.inputs.list_cost import MIX_KINDS
from finops.attribution.inputs.month import BATCH_SIZE, Dims, Inputs
from finops.attribution.ledger.copy_columns import ledger_copy
from finops.attribution.ledger.partitions import (
    ledger_month_analyze,
    ledger_month_clear,
    ledger_month_fresh,
    ledger_month_swap,
)
from finops.attribution.ledger.rollup_sums import (
    MIX_AT,
    Bill,
    DailyKey,
    Ledger,
    RunAcc,
    RunKey,
    daily_merge,
    daily_sums,
    run_sums,
    runs_merge,
)
from finops.attribution.ledger.rows import LEDGER_COLUMNS, day_date, ledger_names, ledger_values
from finops.attribution.ledger.staged import Staged
from finops.attribution.ledger.staging import stage_create, stages_insert
from finops.attribution.models import (
    AllocatedCost,
    Category,
    RecurringCharge,
    RunCost,
    TagCharge,
    TeamDailyCost,
)
from finops.core.money import MoneyField
from finops.core.months import month_format
from finops.core.phases import phase_mark

_GPU_SECONDS_QUANTUM = Decimal("0.000001")
# Page cache while inserting the ledger on SQLite, in the negative-KiB form of the pragma
# (256 MiB at most; SQLite allocates it only as pages are used).
_SQLITE_INSERT_CACHE_KIB = -256 * 1024
_ZERO = Decimal(0)


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


def _insert(
    model: type[models.Model],
    columns: tuple[str, ...],
    rows: Iterable[tuple[Any, ...]],
    *,
    into: str | None = None,
) -> None:
    """Insert plain value tuples: COPY on PostgreSQL, executemany on SQLite. Model instances and
    bulk_create cost ten times more per row, and the ledger has a row per job, node and day.
    The values are what the fields would send (Decimal, date, int, str, None); both drivers
    adapt them as Django does. into: another table with the model's columns (the ledger's
    fresh month, partitions.ledger_month_fresh)."""
    connection = transaction.get_connection()
    quote = connection.ops.quote_name
    fields = {f.attname: f.column for f in model._meta.concrete_fields}
    names = ", ".join(quote(fields[c]) for c in columns)
    table = quote(into or model._meta.db_table)
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
    _insert_fields(model, instances, getattr, with_pk=with_pk)


def _insert_records(
    model: type[models.Model], records: list[dict[str, Any]], *, with_pk: bool = False
) -> None:
    """_insert_instances of rows given as field values by attname, every field in each: a
    month has a RunCost per run (300,000 at 10,000 nodes), and constructing as many model
    instances cost its reduce 7 s."""
    _insert_fields(model, records, dict.__getitem__, with_pk=with_pk)


def _insert_fields(
    model: type[models.Model],
    rows: list[Any],
    value_of: Callable[[Any, str], Any],
    *,
    with_pk: bool,
) -> None:
    """Each row's field values (value_of(row, attname)) as the database takes them, inserted."""
    connection = transaction.get_connection()
    fields = [f for f in model._meta.concrete_fields if with_pk or not f.primary_key]
    columns = tuple(f.attname for f in fields)
    # Values both drivers take as they are: what each field's preparation would give back
    # unchanged (a third of the reduce's rollup writing, RunCost's dozen columns a run).
    # Money values come from units_to_decimal (exact, 12 places), which both drivers take as
    # they are (the ledger's amounts go the same way); DecimalField's own preparation
    # re-quantises each in a fresh context. On PostgreSQL, psycopg adapts dates, aware
    # datetimes and every Decimal itself (SQLite wants Django's text for them).
    plain_types: tuple[type, ...] = (int, str)
    if connection.vendor == "postgresql":
        plain_types = (int, str, Decimal, dt.date, dt.datetime)
    plain = [
        (Decimal,) if isinstance(f, MoneyField) else plain_types
        if not isinstance(f, models.JSONField | models.BooleanField) else ()
        for f in fields
    ]  # fmt: skip
    values = (
        tuple(
            value
            if isinstance(value := value_of(row, f.attname), types) or (value is None and types)
            else f.get_db_prep_save(value, connection)
            for f, types in zip(fields, plain, strict=True)
        )
        for row in rows
    )
    _insert(model, columns, values)


def _rollup_fields(acc: list[Any]) -> dict[str, Any]:
    to_decimal = engine.units_to_decimal
    return {
        "gpu_seconds": acc[1],
        "list_cost": to_decimal(acc[2]),
        "contracted_cost": to_decimal(acc[3]),
        "list_cost_estimated": to_decimal(acc[4]),
        **{f"cost_{kind}": to_decimal(acc[MIX_AT[kind]]) for kind in MIX_KINDS},
    }


def _team_daily_rows(month: dt.date, sums: dict[DailyKey, list[Any]]) -> list[TeamDailyCost]:
    days: dict[int, dt.date] = {}
    return [
        TeamDailyCost(
            billing_period=month,
            day=day_date(day, days),
            team_id=team_id,
            category=category,
            provider_name=provider,
            billing_currency=currency,
            amount=engine.units_to_decimal(acc[0]),
            **_rollup_fields(acc),
        )
        for (day, team_id, category, provider, currency), acc in sums.items()
    ]


def ledger_run_sums(inputs: Inputs, ledger: Ledger) -> dict[RunKey, RunAcc]:
    """The runs' sums over the job rows of the ledger (_run_rows)."""
    wasted = _wasted_jobs(inputs, {key[4] for key in ledger if key[4] is not None})
    return run_sums(inputs.dims, inputs.job_meta, ledger, wasted)


def _run_rows(month: dt.date, runs: dict[RunKey, RunAcc]) -> list[dict[str, Any]]:
    """RunCost per (team, run, cluster, currency) from the job rows of the ledger: a run's jobs,
    counts and times are those that have billed GPU time in the month. Cost includes idle spread
    onto the run's jobs (the `spread` idle policy): the run's fully loaded cost."""
    result = []
    ids: dict[int, RunKey] = {}
    for (team_id, run_id, cluster, currency), acc in runs.items():
        category = Category.INFERENCE if acc.endpoint else Category.TRAINING
        result.append(
            dict(
                id=_run_id(ids, month, (team_id, run_id, cluster, currency)),
                billing_period=month,
                team_id=team_id,
                run_id=run_id,
                cluster=cluster,
                # A run whose pods serve an endpoint is inference, not a training run.
                category=category,
                billing_currency=currency,
                cost=engine.units_to_decimal(acc.columns[0]),
                wasted_cost=engine.units_to_decimal(acc.wasted),
                jobs=len(acc.jobs),
                failed_jobs=len(acc.failed),
                running_jobs=len(acc.running),
                first_start=acc.first_start,
                last_end=acc.last_end,
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
        raise RunIdCollisionError(
            f"runs {other} and {key} of {month_format(month)} share the id {pk}"
        )
    return pk


def _wasted_jobs(inputs: Inputs, job_ids: set[int]) -> set[int]:
    """Jobs in a waste state, less the serving pods that answered requests before they ended."""
    job_meta = inputs.job_meta
    failed = {j for j in job_ids if in_waste_state(job_meta[j].state, job_meta[j].service)}
    serving = {
        j: ServingPod(meta.endpoint, meta.job_id, meta.start, meta.end)
        for j in failed
        if (meta := inputs.job_meta[j]).endpoint
    }
    return failed - pods_that_served(serving)


class ConservationError(RuntimeError):
    """The ledger about to be written does not add up to the bill (a bug, never data)."""


def allocated_sums(dims: list[Dims], ledger: Ledger) -> Bill:
    """The ledger's sums in the bill's shape: per provider, account, currency and column."""
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
    return allocated


def check_conservation(
    bill: Bill, dims: list[Dims], ledger: Ledger, staged: Bill | None = None
) -> None:
    """Exact check in memory before writing: per provider, account and currency, the ledger's
    sum of each column (EffectiveCost, on-demand equivalent, ContractedCost) equals the line
    items' (bill). staged: the same sums of the rows the month's parts wrote themselves. A
    failure is a bug; the run fails and the month keeps its previous rows rather than get a
    ledger that does not add up."""
    allocated = allocated_sums(dims, ledger)
    for key, units in (staged or {}).items():
        allocated[key] = allocated.get(key, 0) + units
    bill_sums = {k: v for k, v in bill.items() if v}
    allocated = {k: v for k, v in allocated.items() if v}
    if bill_sums != allocated:
        raise ConservationError(f"ledger {allocated} != bill {bill_sums} (in 10^-12 units)")


def write(
    month: dt.date,
    inputs: Inputs,
    ledger: Ledger,
    *,
    charges: ChargeSums | None = None,
    staged: Staged | None = None,
    fresh: str | None = None,
) -> None:
    """Replace the month's ledger and rollups (inside the caller's transaction), the budgets'
    rollups of its line items included: charges, summed while the month's line items were
    read, else read now (charge_rollups). staged: the rows the month's parts wrote themselves
    (staging tables, copied on the server) and their rollups' sums. fresh: the month's fresh
    table, made and holding the staged rows already (stage_copy.py)."""
    daily = daily_sums(inputs.dims, ledger)
    runs = ledger_run_sums(inputs, ledger)
    if staged is not None:
        daily_merge(daily, staged.daily)
        runs_merge(runs, staged.runs)
    daily_rows = _team_daily_rows(month, daily)
    run_rows = _run_rows(month, runs)
    del daily, runs
    recurring_rows, tag_rows = charges.rows(month) if charges is not None else charge_rollups(month)
    phase_mark("rollup_sums")
    # PostgreSQL: the month's rows go into a fresh table, swapped in at the end (partitions.py).
    copied = fresh is not None
    if fresh is None:
        fresh = ledger_month_fresh(month=month)
    if fresh is None:
        ledger_month_clear(month=month)
    for rollup in (TeamDailyCost, RunCost, RecurringCharge, TagCharge):
        rollup.objects.filter(billing_period=month).delete()
    if staged is not None and staged.tables and not copied:
        stages_insert(staged.tables, ledger_names(), into=fresh or AllocatedCost._meta.db_table)
    phase_mark("ledger_clear")
    _ledger_insert(fresh or AllocatedCost._meta.db_table, month, inputs, ledger)
    phase_mark("ledger_insert")
    _insert_instances(TeamDailyCost, daily_rows)
    _insert_records(RunCost, run_rows, with_pk=True)
    _insert_instances(RecurringCharge, recurring_rows)
    _insert_instances(TagCharge, tag_rows)
    phase_mark("rollup_insert")
    if fresh is not None:
        ledger_month_swap(month=month, fresh=fresh)
        phase_mark("ledger_indexes_swap")
    rollups = [model._meta.db_table for model in (TeamDailyCost, RunCost)]
    ledger_month_analyze(rollups=rollups, swapped=fresh is not None)
    phase_mark("analyze")


def stage_write(table: str, month: dt.date, inputs: Inputs, ledger: Ledger) -> None:
    """Write ledger rows into a part's staging table (staging.py), replacing what it held."""
    stage_create(table, ledger_names())
    _ledger_insert(table, month, inputs, ledger)


def _ledger_insert(table: str, month: dt.date, inputs: Inputs, ledger: Ledger) -> None:
    """Ledger rows into table: as columns on PostgreSQL (copy_columns.py), value tuples on
    SQLite."""
    if transaction.get_connection().vendor == "postgresql":
        ledger_copy(table, month, inputs, ledger)
        return
    _insert(AllocatedCost, LEDGER_COLUMNS, ledger_values(month, inputs, ledger), into=table)
