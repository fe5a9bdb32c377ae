"""The ledger's month partitions on PostgreSQL (migration 0008: attribution_allocatedcost is
partitioned by RANGE of billing_period, one partition per month).

A month's partition is created before its first attribution (a plain table LIKE the parent,
then ATTACH: that locks the parent in SHARE UPDATE EXCLUSIVE mode, which readers and writers of
other months never wait for, where CREATE TABLE ... PARTITION OF would lock it exclusively).
Re-attributing the month loads its new rows into a fresh table with no index and no foreign
key (ledger_month_fresh), indexes it, then puts it in place of the month's partition
(ledger_month_swap), all inside the run's transaction: rolled back with it on failure, and
readers see the previous month until the commit. At 10,000 nodes (6.9M ledger rows) inserting
into the indexed partition and checking each row's team at COMMIT took about 110 s; loading,
indexing and attaching the plain table about 30 s. On SQLite, or a PostgreSQL ledger that is not
partitioned, the month's rows are deleted as before. Rows written for a month that has no
partition yet (outside an attribution run) go to the DEFAULT partition and move into the month's
partition when it is created.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django.db import connection, transaction

from finops.attribution.models import AllocatedCost

TABLE = AllocatedCost._meta.db_table
DEFAULT = f"{TABLE}_default"


def partition_name(month: dt.date) -> str:
    return f"{TABLE}_m{month:%Y%m}"


def _month_stop(month: dt.date) -> dt.date:
    return (month + dt.timedelta(days=32)).replace(day=1)


def _bounds(month: dt.date) -> str:
    return f"FROM ('{month:%Y-%m-%d}') TO ('{_month_stop(month):%Y-%m-%d}')"


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
    stop = _month_stop(month)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f'CREATE TABLE IF NOT EXISTS "{name}" (LIKE "{TABLE}")')
        # Two runs may race to attach the same month: the second waits on the parent's lock,
        # then sees the partition attached.
        cursor.execute(f'LOCK TABLE "{TABLE}" IN SHARE UPDATE EXCLUSIVE MODE')
        if not _attached(name):
            _default_rows_move(cursor, name, month, stop)
            cursor.execute(
                f'ALTER TABLE "{TABLE}" ATTACH PARTITION "{name}" FOR VALUES {_bounds(month)}'
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
    """Delete the month's ledger rows (inside the caller's transaction) where the ledger is not
    partitioned (SQLite); a partitioned ledger's month is replaced whole (ledger_month_swap)."""
    AllocatedCost.objects.filter(billing_period=month).delete()


def ledger_month_fresh(*, month: dt.date) -> str | None:
    """The table the month's new ledger rows go into (inside the run's transaction) until
    ledger_month_swap puts it in place of the month's partition: like the ledger, its ids from
    the ledger's own identity sequence, and no index or foreign key to maintain row by row.
    None where the ledger is not partitioned: ledger_month_clear, then rows into the ledger."""
    if not ledger_partition_ensure(month=month):  # made before the run's transaction
        return None
    fresh = f"{partition_name(month)}_next"
    with connection.cursor() as cursor:
        # LIKE the month's partition (created before the run's transaction), not the ledger:
        # LIKE holds a lock on its model to the commit, and two months' runs each holding one
        # on the ledger would deadlock when each detaches its partition.
        cursor.execute(f'CREATE TABLE "{fresh}" (LIKE "{partition_name(month)}")')
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [TABLE])
        (sequence,) = cursor.fetchone()
        cursor.execute(f"ALTER TABLE \"{fresh}\" ALTER COLUMN id SET DEFAULT nextval('{sequence}')")
    return fresh


# pg_get_indexdef of one of the ledger's (partitioned) indexes.
_INDEX_DEF = re.compile(r"^CREATE (UNIQUE )?INDEX \S+ ON ONLY \S+ (USING .+)$")


def ledger_month_swap(*, month: dt.date, fresh: str) -> None:
    """Index the fresh table as the ledger is indexed, gather its planner statistics, and put it
    in place of the month's partition (inside the run's transaction, as late as possible:
    detaching the old partition locks the whole ledger until the commit). The indexes are
    built before that lock; ATTACH then adopts them and proves the month by the CHECK
    constraint instead of a scan. The ledger has no foreign key (models.AllocatedCost): with
    one, dropping and attaching would lock the referenced table too, and two months' runs
    swapping at once would deadlock on it."""
    name = partition_name(month)
    with connection.cursor() as cursor:
        cursor.execute(f'ALTER TABLE "{fresh}" ALTER COLUMN id DROP DEFAULT')
        check = f"{fresh}_month"
        cursor.execute(
            f'ALTER TABLE "{fresh}" ADD CONSTRAINT "{check}" CHECK (billing_period >= '
            f"'{month:%Y-%m-%d}' AND billing_period < '{_month_stop(month):%Y-%m-%d}')"
        )
        named = _indexes_repeat(cursor, fresh)
        cursor.execute(f'ANALYZE "{fresh}"')
        cursor.execute(f'ALTER TABLE "{TABLE}" DETACH PARTITION "{name}"')
        cursor.execute(f'DROP TABLE "{name}"')
        cursor.execute(f'ALTER TABLE "{fresh}" RENAME TO "{name}"')
        cursor.execute(
            f'ALTER TABLE "{TABLE}" ATTACH PARTITION "{name}" FOR VALUES {_bounds(month)}'
        )
        cursor.execute(f'ALTER TABLE "{name}" DROP CONSTRAINT "{check}"')
        cursor.execute(f'ALTER TABLE "{name}" RENAME CONSTRAINT "{fresh}_pkey" TO "{name}_pkey"')
        for index in named:
            cursor.execute(f'ALTER INDEX "{fresh}_{index}" RENAME TO "{name}_{index}"')


def _indexes_repeat(cursor: Any, fresh: str) -> list[str]:
    """The ledger's indexes on the fresh table, its primary key as a constraint (ATTACH adopts
    an index for a constraint only from a constraint; it would build another); returns the
    other indexes' names after the table's. They are named here, not by PostgreSQL: its name
    is the table's and the columns' cut to 63 characters, which drops the month
    ("attribution_allocatedcost_m20..."), and it checks that a name is free, then takes it, so
    two months' runs indexing at the same moment can both take "..._idx1"; one then fails (CI,
    stop 41; billing_ingest's partitions name theirs for the same reason)."""
    cursor.execute(
        "SELECT pg_get_indexdef(i.indexrelid), i.indisprimary, EXISTS (SELECT 1 FROM "
        "pg_constraint c WHERE c.conindid = i.indexrelid AND c.contype <> 'p') "
        "FROM pg_index i WHERE i.indrelid = %s::regclass",
        [TABLE],
    )
    named: list[str] = []
    for definition, primary, other_constraint in cursor.fetchall():
        found = _INDEX_DEF.match(definition)
        if found is None or other_constraint:
            raise RuntimeError(f"cannot repeat the ledger's index {definition!r}")
        if primary:
            key = f"{fresh}_pkey"
            cursor.execute(f'CREATE UNIQUE INDEX "{key}" ON "{fresh}" {found[2]}')
            cursor.execute(
                f'ALTER TABLE "{fresh}" ADD CONSTRAINT "{key}" PRIMARY KEY USING INDEX "{key}"'
            )
        else:
            index, unique = f"i{len(named)}", found[1] or ""
            cursor.execute(f'CREATE {unique}INDEX "{fresh}_{index}" ON "{fresh}" {found[2]}')
            named.append(index)
    return named


def ledger_month_analyze(*, rollups: list[str], swapped: bool = False) -> None:
    """Fresh planner statistics for the month's rewritten ledger partition and the rollup
    tables (inside the caller's transaction; PostgreSQL only). The pipeline's next steps read
    them seconds later, before autovacuum would (and never where it is off): without them
    PostgreSQL guessed 163 rows for a 686k-row partition and joined it to its jobs one lookup
    at a time (endpoint costs: 3-4 s instead of 0.1 s). ANALYZE samples a fixed number of rows,
    so it costs about the same for any month. swapped: ledger_month_swap analysed the
    partition already; else the ledger is one plain table."""
    if connection.vendor != "postgresql":
        return
    tables = [] if swapped else [TABLE]
    with connection.cursor() as cursor:
        for table in [*tables, *rollups]:
            cursor.execute(f'ANALYZE "{table}"')
