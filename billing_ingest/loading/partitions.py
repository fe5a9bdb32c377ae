"""The line items' partitions on PostgreSQL (migration 0012): billing_ingest_costlineitem is
partitioned by RANGE of billing_period (one table per month, ``..._mYYYYMM``), and each month by
LIST of batch_id (one table per import batch, ``..._mYYYYMM_bN``), so that a restatement swap and
the deletion of a batch are partition operations, not row deletes.

- Loading: a part COPYs each month's rows into a standalone table of its own
  (``..._mYYYYMM_bN_pK``, created on demand before the COPY, shaped like the partitions, no
  index, with a CHECK that says which batch and month it holds). Nothing on the parent is
  locked while the file loads, and parts of one delivery load side by side. A worker dying
  mid-part rolls the table back with its rows.
- The finish step (one transaction, with the batch's status): per month, in month order, the
  month's table is created if missing, the parts' tables become the batch's partition, are
  indexed and ATTACHed (the CHECK spares PostgreSQL the scan; it adopts the indexes), and the
  source's other batches' partitions of that month are DROPped. A failed import drops its
  parts' tables and never touches the partitions of the previous data. Rolled back, nothing
  was attached.
- Rows written outside an import (fixtures, admin tools, tests) land in a DEFAULT partition:
  the root's for a month without its table, the month's for a batch without its partition.
  They are moved where they belong when that table is made, and deleted row by row.

On SQLite, or a PostgreSQL table that is not partitioned, none of this applies: parts load into
the table and the swap deletes rows (the callers check ``line_items_partitioned``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from django.db import connection

from billing_ingest.models import CostLineItem

TABLE = CostLineItem._meta.db_table
DEFAULT = f"{TABLE}_default"


def month_table(month: dt.date) -> str:
    return f"{TABLE}_m{month:%Y%m}"


def batch_table(month: dt.date, batch_id: int) -> str:
    return f"{month_table(month)}_b{batch_id}"


def part_table(month: dt.date, batch_id: int, index: int) -> str:
    return f"{batch_table(month, batch_id)}_p{index}"


def _next_month(month: dt.date) -> dt.date:
    return (month.replace(day=1) + dt.timedelta(days=32)).replace(day=1)


def line_items_partitioned() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [TABLE])
        return cursor.fetchone() is not None


def _exists(cursor: Any, name: str) -> bool:
    cursor.execute("SELECT to_regclass(%s)", [f'"{name}"'])
    return bool(cursor.fetchone()[0] is not None)


def _attached(cursor: Any, parent: str, name: str) -> bool:
    cursor.execute(
        "SELECT 1 FROM pg_inherits "
        "WHERE inhparent = to_regclass(%s) AND inhrelid = to_regclass(%s)",
        [f'"{parent}"', f'"{name}"'],
    )
    return cursor.fetchone() is not None


def part_table_create(*, month: dt.date, batch_id: int, index: int) -> str:
    """The standalone table a part COPYs its rows of month into (inside the part's transaction);
    returns its name."""
    name = part_table(month, batch_id, index)
    stop = _next_month(month)
    with connection.cursor() as cursor:
        if _exists(cursor, name):
            return name
        cursor.execute(f'CREATE TABLE "{name}" (LIKE "{TABLE}" INCLUDING CONSTRAINTS)')
        # Ids from the parent's sequence, as rows inserted through the parent get theirs.
        cursor.execute(
            f'ALTER TABLE "{name}" ALTER COLUMN id SET DEFAULT '
            f"nextval(pg_get_serial_sequence('{TABLE}', 'id'))"
        )
        # Implies the partition constraint, so ATTACH need not scan the rows to prove it.
        cursor.execute(
            f'ALTER TABLE "{name}" ADD CONSTRAINT "{name}_bounds" '
            f"CHECK (batch_id = {int(batch_id)} AND billing_period >= '{month:%Y-%m-%d}' "
            f"AND billing_period < '{stop:%Y-%m-%d}')"
        )
    return name


def months_ensure(*, months: Iterable[dt.date]) -> None:
    """Create and attach the months' tables (partitioned by batch, each with its DEFAULT) that
    are missing, inside the caller's transaction. The root is locked first (SHARE UPDATE
    EXCLUSIVE: readers and writers of other months do not wait), so that two swaps never hold a
    month each while waiting for the root, and a second creator sees the table made."""
    with connection.cursor() as cursor:
        missing = [m for m in sorted(set(months)) if not _attached(cursor, TABLE, month_table(m))]
        if not missing:
            return
        cursor.execute(f'LOCK TABLE "{TABLE}" IN SHARE UPDATE EXCLUSIVE MODE')
        for month in missing:
            if not _attached(cursor, TABLE, month_table(month)):
                _month_create(cursor, month)


# pg_get_indexdef of one of the line items' (partitioned) indexes.
_INDEX_DEF = re.compile(r"^CREATE (UNIQUE )?INDEX \S+ ON ONLY \S+ (USING .+)$")


def _indexes_name(cursor: Any, table: str) -> None:
    """The line items' indexes (primary key aside) on the batch's table before it is attached,
    named after it ("{table}_i0", ...): ATTACH adopts them instead of building its own. Its own
    name is the table's and the columns' cut to 63 characters, which drops the month and the
    batch ("billing_ingest_costlineitem_m_billing_period_provider_name_idx4"), and PostgreSQL
    checks that the name is free, then inserts it: two imports of different months (each
    holding only its month's lock) picking at the same instant took the same name, and the
    second failed on pg_class_relname_nsp_index (up to 12 rounds in 60 of
    test_two_months_indexed_at_the_same_time_both_commit). The primary key is left to ATTACH:
    its name, "{table}_pkey", is whole, and ATTACH adopts a key only from a constraint. A
    month's table keeps PostgreSQL's names: months_ensure makes it under its lock on the root,
    which LOCK TABLE takes on every month's table too, so no batch's ATTACH (nor another
    month's creation) runs beside it."""
    cursor.execute(
        "SELECT pg_get_indexdef(i.indexrelid), EXISTS (SELECT 1 FROM pg_constraint c "
        "WHERE c.conindid = i.indexrelid) FROM pg_index i "
        "WHERE i.indrelid = %s::regclass AND NOT i.indisprimary ORDER BY i.indexrelid",
        [TABLE],
    )
    for number, (definition, constraint) in enumerate(cursor.fetchall()):
        found = _INDEX_DEF.match(definition)
        if found is None or constraint:
            raise RuntimeError(f"cannot repeat the line items' index {definition!r}")
        cursor.execute(f'CREATE {found[1] or ""}INDEX "{table}_i{number}" ON "{table}" {found[2]}')


def _month_create(cursor: Any, month: dt.date) -> None:
    name = month_table(month)
    stop = _next_month(month)
    cursor.execute(
        f'CREATE TABLE "{name}" (LIKE "{TABLE}" INCLUDING CONSTRAINTS) PARTITION BY LIST (batch_id)'
    )
    cursor.execute(f'CREATE TABLE "{name}_default" PARTITION OF "{name}" DEFAULT')
    # ATTACH refuses while the root's DEFAULT holds rows of the month: they move in first.
    cursor.execute(
        f'WITH moved AS (DELETE FROM "{DEFAULT}" WHERE billing_period >= %s '
        f'AND billing_period < %s RETURNING *) INSERT INTO "{name}" SELECT * FROM moved',
        [month, stop],
    )
    cursor.execute(
        f'ALTER TABLE "{TABLE}" ATTACH PARTITION "{name}" '
        f"FOR VALUES FROM ('{month:%Y-%m-%d}') TO ('{stop:%Y-%m-%d}')"
    )


def _part_tables(cursor: Any, month: dt.date, batch_id: int) -> list[str]:
    prefix = f"{batch_table(month, batch_id)}_p"
    cursor.execute(
        "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = "
        "current_schema()::regnamespace AND left(relname, %s) = %s "
        "AND substr(relname, %s) ~ '^[0-9]+$' ORDER BY relname",
        [len(prefix), prefix, len(prefix) + 1],
    )
    return [name for (name,) in cursor.fetchall()]


def batch_partition_attach(*, month: dt.date, batch_id: int) -> bool:
    """Inside the finish transaction: make the batch's loaded parts of month its partition
    and attach it to the month's table (months_ensure first). False when no part loaded a table
    for the month."""
    with connection.cursor() as cursor:
        parts = _part_tables(cursor, month, batch_id)
        if not parts:
            return False
        parent = month_table(month)
        name = batch_table(month, batch_id)
        cursor.execute(f'ALTER TABLE "{parts[0]}" RENAME TO "{name}"')
        cursor.execute(
            f'ALTER TABLE "{name}" RENAME CONSTRAINT "{parts[0]}_bounds" TO "{name}_bounds"'
        )
        # Several parts of one delivery in one month: one batch, so one partition.
        for other in parts[1:]:
            cursor.execute(f'INSERT INTO "{name}" SELECT * FROM "{other}"')
            cursor.execute(f'DROP TABLE "{other}"')
        cursor.execute(
            f'WITH moved AS (DELETE FROM "{parent}_default" WHERE batch_id = %s RETURNING *) '
            f'INSERT INTO "{name}" SELECT * FROM moved',
            [batch_id],
        )
        _indexes_name(cursor, name)
        cursor.execute(
            f'ALTER TABLE "{parent}" ATTACH PARTITION "{name}" FOR VALUES IN ({int(batch_id)})'
        )
    return True


def month_batch_partitions(*, month: dt.date) -> dict[int, str]:
    """Batch id -> partition name of the month's batch partitions."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s)",
            [f'"{month_table(month)}"'],
        )
        names = [name for (name,) in cursor.fetchall()]
    prefix = f"{month_table(month)}_b"
    return {
        int(name[len(prefix) :]): name
        for name in names
        if name.startswith(prefix) and name[len(prefix) :].isdigit()
    }


def month_loading_tables(*, month: dt.date) -> dict[int, list[str]]:
    """Batch id -> the month's loading tables of parts of that batch that no finish step has
    attached (committed ones only: a part still loading holds its table uncommitted)."""
    prefix = f"{month_table(month)}_b"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = "
            "current_schema()::regnamespace AND relname ~ %s ORDER BY relname",
            [f"^{prefix}[0-9]+_p[0-9]+$"],
        )
        names = [name for (name,) in cursor.fetchall()]
    tables: dict[int, list[str]] = {}
    for name in names:
        batch_id = int(name[len(prefix) :].split("_p")[0])
        tables.setdefault(batch_id, []).append(name)
    return tables


def partitions_drop(names: Iterable[str]) -> None:
    """DROP the tables (inside the caller's transaction). Locks each one's parent exclusively
    until the commit: readers of that month wait for the swap rather than see it half done."""
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f'DROP TABLE IF EXISTS "{name}"')


def batch_tables(*, batch_id: int) -> list[str]:
    """Every table holding the batch's rows alone: its partitions and its parts' tables."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = "
            "current_schema()::regnamespace AND relname ~ %s ORDER BY relname",
            [f"^{TABLE}_m[0-9]{{6}}_b{int(batch_id)}(_p[0-9]+)?$"],
        )
        return [name for (name,) in cursor.fetchall()]
