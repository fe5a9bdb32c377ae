"""Filters on long lists of values, and timestamps read as integers, cheaply on PostgreSQL.

`field__in=values` with tens of thousands of values (every run or job of a month) costs far
more in Python than in the database: Django prepares each value as a parameter and psycopg
scans the whole statement, megabytes of it, for placeholders. At 1,000 nodes / 300,000 jobs
the run-economics step spent about 50 of its 300 s (cProfile) building such statements.
AnyOf sends the list as one array parameter instead (`field = ANY(%s)`, the same plan as the
IN list the server would make of it); SQLite gets it as one JSON parameter (json_each), so no
caller needs to cut its list into chunks under SQLite's cap on parameters.

EpochMicros reads a timestamp as its microseconds since 1970 (an integer, exact): Django's
timestamptz loader is Python code run for every cell (30 s for the 1.2M start and end times
the same step read). from_epoch_micros gives the same aware datetime back.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import F, Func
from django.db.models.sql.compiler import SQLCompiler

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# The PostgreSQL array type of each kind of column an AnyOf compares.
_ARRAY_TYPES = {
    "AutoField": "bigint[]",
    "BigAutoField": "bigint[]",
    "BigIntegerField": "bigint[]",
    "IntegerField": "bigint[]",
    "PositiveIntegerField": "bigint[]",
    "ForeignKey": "bigint[]",
    "CharField": "text[]",
    "TextField": "text[]",
    "SlugField": "text[]",
}


class AnyOf(Func):
    """Filter: the column `name` is one of `values` (`queryset.filter(AnyOf("run_id", ids))`).
    No values: nothing matches."""

    output_field = models.BooleanField()
    conditional = True

    def __init__(self, name: str, values: Iterable[Any]) -> None:
        super().__init__(F(name))
        self.values = sorted(set(values))

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[Any, ...]]:
        if not self.values:
            # As `field__in=[]`: the compiler then answers without asking the database (the
            # pages' query budgets count on it), and a negated AnyOf matches every row.
            raise EmptyResultSet
        column, params = compiler.compile(self.source_expressions[0])
        if connection.vendor == "postgresql":
            field = self.source_expressions[0].output_field
            array = _ARRAY_TYPES.get(field.get_internal_type())
            if array is not None:
                # One parameter, the list (psycopg sends it as an array).
                values: Any = self.values
                return f"{column} = ANY(%s::{array})", (*params, values)
        if connection.vendor == "sqlite":
            # One parameter too (SQLite caps a statement's parameters), the list as JSON.
            return f"{column} IN (SELECT value FROM json_each(%s))", (
                *params,
                json.dumps(self.values),
            )
        marks = ", ".join(["%s"] * len(self.values))
        return f"{column} IN ({marks})", (*params, *self.values)


class EpochMicros(Func):
    """A timestamp column as integer microseconds since 1970 (NULL stays NULL); PostgreSQL
    only (epoch_micros picks it there and the column itself elsewhere)."""

    output_field = models.BigIntegerField()

    def __init__(self, name: str) -> None:
        super().__init__(F(name))

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[Any, ...]]:
        column, params = compiler.compile(self.source_expressions[0])
        # EXTRACT gives exact numeric seconds with the microseconds: x 10^6 is an integer.
        return f"(EXTRACT(EPOCH FROM {column}) * 1000000)::bigint", tuple(params)


def epoch_micros(queryset: models.QuerySet[Any], name: str) -> EpochMicros | F:
    """What to select for the timestamp `name` of the queryset's rows: EpochMicros on
    PostgreSQL, the column (an aware datetime) elsewhere; from_epoch_micros reads either."""
    if connections[queryset.db].vendor == "postgresql":
        return EpochMicros(name)
    return F(name)


def from_epoch_micros(value: int | dt.datetime | None) -> dt.datetime | None:
    """An EpochMicros value as the aware UTC datetime the column holds."""
    if value is None or isinstance(value, dt.datetime):
        return value
    return _EPOCH + dt.timedelta(microseconds=value)


def epoch_seconds(value: int | dt.datetime) -> float:
    """An EpochMicros value (or the datetime itself) as datetime.timestamp() gives it: the
    same float (both divide the integer microseconds by 10^6 once)."""
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return value / 1_000_000
