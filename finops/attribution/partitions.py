"""The ledger's month partitions on PostgreSQL (migration 0008: attribution_allocatedcost is
partitioned by RANGE of billing_period, one partition per month).

A month's partition is created before its first attribution (a plain table LIKE the parent,
then ATTACH: that locks the parent in SHARE UPDATE EXCLUSIVE mode, which readers and writers of
other months never wait for, where CREATE TABLE ... PARTITION OF would lock it exclusively).
Re-attributing the month truncates its partition (one statement, no per-row delete and no dead
rows to vacuum) inside the run's transaction: rolled back with it on failure, and readers of that
month wait for the commit rather than see it empty. On SQLite, or a PostgreSQL ledger that is not
partitioned, the month's rows are deleted as before. Rows written for a month that has no
partition yet (outside an attribution run) go to the DEFAULT partition and move into the month's
partition when it is created.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection, transaction

from finops.attribution.models import AllocatedCost

TABLE = AllocatedCost._meta.db_table
DEFAULT = f"{TABLE}_default"


def partition_name(month: dt.date) -> str:
    return f"{TABLE}_m{month:%Y%m}"


def _partitioned() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [TABLE])
        return cursor.fetchone() is not None


def _attached(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_inherits WHERE inhparent = %s::regclass "
            "AND inhrelid = to_regclass(%s)",
            [TABLE, name],
        )
        return cursor.fetchone() is not None


def ledger_partition_ensure(*, month: dt.date) -> bool:
    """Create and attach the month's ledger partition unless it exists; False where the ledger
    is not partitioned (SQLite)."""
    if not _partitioned():
        return False
    name = partition_name(month)
    if _attached(name):
        return True
    stop = (month + dt.timedelta(days=32)).replace(day=1)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f'CREATE TABLE IF NOT EXISTS "{name}" (LIKE "{TABLE}")')
        # Two runs may race to attach the same month: the second waits on the parent's lock,
        # then sees the partition attached.
        cursor.execute(f'LOCK TABLE "{TABLE}" IN SHARE UPDATE EXCLUSIVE MODE')
        if not _attached(name):
            _default_rows_move(cursor, name, month, stop)
            cursor.execute(
                f'ALTER TABLE "{TABLE}" ATTACH PARTITION "{name}" '
                f"FOR VALUES FROM ('{month:%Y-%m-%d}') TO ('{stop:%Y-%m-%d}')"
            )
    return True


def _default_rows_move(cursor: Any, name: str, month: dt.date, stop: dt.date) -> None:
    """Move the month's rows out of the DEFAULT partition into its new partition (ATTACH
    refuses while the default holds rows of the new range). Rows land in the default only when
    written before the month had a partition (not by attribution, which creates it first)."""
    cursor.execute("SELECT to_regclass(%s)", [DEFAULT])
    if cursor.fetchone()[0] is None:
        return
    cursor.execute(
        f'WITH moved AS (DELETE FROM "{DEFAULT}" WHERE billing_period >= %s '
        f'AND billing_period < %s RETURNING *) INSERT INTO "{name}" SELECT * FROM moved',
        [month, stop],
    )


def ledger_month_clear(*, month: dt.date) -> None:
    """Empty the month's ledger (inside the caller's transaction): TRUNCATE its partition on a
    partitioned ledger, else delete its rows."""
    if ledger_partition_ensure(month=month):
        with connection.cursor() as cursor:
            # TRUNCATE refuses a table with deferred FK checks pending (rows inserted earlier in
            # the same transaction): run them now, then defer again as Django's FKs are.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(f'TRUNCATE "{partition_name(month)}"')
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        return
    AllocatedCost.objects.filter(billing_period=month).delete()


def ledger_month_analyze(*, month: dt.date, rollups: list[str]) -> None:
    """Fresh planner statistics for the month's rewritten ledger partition and the rollup
    tables (inside the caller's transaction; PostgreSQL only). The pipeline's next steps read
    them seconds later, before autovacuum would (and never where it is off): without them
    PostgreSQL guessed 163 rows for a 686k-row partition and joined it to its jobs one lookup
    at a time (endpoint costs: 3-4 s instead of 0.1 s). ANALYZE samples a fixed number of rows,
    so it costs about the same for any month."""
    if connection.vendor != "postgresql":
        return
    tables = [partition_name(month)] if _partitioned() else [TABLE]
    with connection.cursor() as cursor:
        for table in [*tables, *rollups]:
            cursor.execute(f'ANALYZE "{table}"')
