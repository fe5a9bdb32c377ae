"""Staging tables of a month attributed in parts, on PostgreSQL (staged.py says what they hold).

A split run has a stage id (stage_new: month, time, random), given to its parts and its reduce.
Each part writes its rows into a table of its own named after the stage id and its resource
range (stage_table): a redelivered part replaces its table (DROP, CREATE, COPY in the part's
transaction), so its rows are never there twice. The tables are UNLOGGED (no WAL: they are
copied once and dropped) and not part of the ledger, so no reader sees them. The reduce copies
them into the ledger on the server in its own transaction (stages_insert: INSERT ... SELECT,
which also checks each table still holds the rows its part counted: an unlogged table is
emptied by a server crash) and drops them when it ends, committed or failed (stages_drop).
Tables a killed reduce left behind are dropped by a later reduce once they are older than
STALE (stages_drop_stale). A reduce delivered again after it committed finds its tables gone
and returns the run that succeeded (services._reduced_already).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets
import time

from django.db import connection

from finops.attribution.inputs.month import ResourceRange
from finops.attribution.ledger.partitions import TABLE

PREFIX = "attribution_stage_"
# Older than any live split run: a part or reduce is killed after tasks.TIME_LIMIT (35 min),
# and a chord's parts wait in the queue at most this long behind other months.
STALE = dt.timedelta(hours=6)
_STAGE = re.compile(r"^(\d{6})_(\d{10})_([0-9a-f]{6})$")
_TABLE = re.compile(rf"^{PREFIX}\d{{6}}_\d{{10}}_[0-9a-f]{{6}}_[0-9a-f]{{8}}$")


class StageMissingError(RuntimeError):
    """A part's staging table does not hold the rows the part wrote (dropped, or emptied by a
    server crash): the month must be attributed again."""


def available() -> bool:
    return connection.vendor == "postgresql"


def stage_new(month: dt.date) -> str:
    return f"{month:%Y%m}_{int(time.time()):010d}_{secrets.token_hex(3)}"


def _checked(stage: str) -> str:
    """The stage id names tables: only the form stage_new makes."""
    if not _STAGE.match(stage):
        raise ValueError(f"not a stage id: {stage!r}")
    return stage


def stage_table(stage: str, part: ResourceRange) -> str:
    bounds = f"{part.first!r}:{part.stop!r}".encode()
    return f"{PREFIX}{_checked(stage)}_{hashlib.sha256(bounds).hexdigest()[:8]}"


def stage_create(table: str, columns: list[str]) -> None:
    """An empty staging table with the ledger's columns (replacing one of the same name). The
    column types are read from the catalog, not by selecting from the ledger: that would hold
    a lock on the ledger and every partition for the part's whole transaction, and another
    month's reduce, swapping its partition in (partitions.ledger_month_swap), would wait for
    the part with every reader of the ledger queued behind it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
            [TABLE],
        )
        types = dict(cursor.fetchall())
        definition = ", ".join(f'"{c}" {types[c]}' for c in columns)
        cursor.execute(f'DROP TABLE IF EXISTS "{table}"')
        cursor.execute(f'CREATE UNLOGGED TABLE "{table}" ({definition})')


def stages_insert(tables: list[tuple[str, int]], columns: list[str], *, into: str) -> None:
    """Copy the staging tables into the ledger (into: the ledger's table, or the month's fresh
    one: partitions.ledger_month_fresh), on the server (the caller's transaction)."""
    with connection.cursor() as cursor:
        for table, rows in tables:
            if not _TABLE.match(table):  # a name from a part's result, put into SQL
                raise ValueError(f"not a staging table: {table!r}")
            cursor.execute("SELECT to_regclass(%s)", [f'"{table}"'])
            if cursor.fetchone()[0] is None:
                raise StageMissingError(f"{table} is gone")
            cursor.execute(stage_insert_sql(table, columns, into=into))
            stage_rows_check(table, copied=cursor.rowcount, reported=rows)


def stage_insert_sql(table: str, columns: list[str], *, into: str) -> str:
    """The statement that copies a staging table's rows into the ledger (or a fresh month)."""
    quoted = ", ".join(f'"{c}"' for c in columns)
    return f'INSERT INTO "{into}" ({quoted}) SELECT {quoted} FROM "{table}"'


def stage_rows_check(table: str, *, copied: int, reported: int) -> None:
    """A staging table must hold the rows its part reported (a crash can empty it)."""
    if copied != reported:
        raise StageMissingError(f"{table} holds {copied} rows, not {reported}")


def _tables(prefix: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND starts_with(relname, %s) "
            "AND relnamespace = current_schema()::regnamespace",
            [prefix],
        )
        return [name for (name,) in cursor.fetchall()]


def _drop(tables: list[str]) -> None:
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f'DROP TABLE IF EXISTS "{table}"')


def stage_began(stage: str) -> dt.datetime:
    """When the split run's stage id was made (before its plan and parts)."""
    return dt.datetime.fromtimestamp(int(_checked(stage).split("_")[1]), tz=dt.UTC)


def stage_tables(stage: str) -> list[str]:
    return _tables(f"{PREFIX}{_checked(stage)}_") if available() else []


def stages_drop(stage: str) -> None:
    """Drop the staging tables of a split run (all its parts')."""
    _drop(stage_tables(stage))


def stages_drop_stale(now: float | None = None) -> list[str]:
    """Drop staging tables older than STALE (left by a reduce that was killed); their names."""
    if not available():
        return []
    limit = (time.time() if now is None else now) - STALE.total_seconds()
    stale = []
    for table in _tables(PREFIX):
        match = _STAGE.match(table[len(PREFIX) : len(PREFIX) + 24])
        if match is not None and int(match.group(2)) < limit:
            stale.append(table)
    _drop(stale)
    return stale
