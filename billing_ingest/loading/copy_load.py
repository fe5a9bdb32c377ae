"""Bulk insert of many rows: COPY on PostgreSQL, batched bulk_create elsewhere (SQLite).

Row-by-row ORM saves are far too slow for billing exports of millions of rows (DESIGN section 8).
Rows are dicts keyed by field attname (``batch_id`` for a foreign key); a missing key takes the
field's default. Runs on the caller's connection and inside the caller's transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models.fields import AutoFieldMixin, Field

SQLITE_BATCH_ROWS = 500
_Save = Callable[[Any, BaseDatabaseWrapper], Any]


def _load_fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    # Every stored column except an auto-increment primary key, which the sequence fills.
    return [
        field
        for field in model._meta.concrete_fields
        if not (field.primary_key and isinstance(field, models.AutoField | models.BigAutoField))
    ]


def _copy_value(field: models.Field[Any, Any], value: object) -> object:
    # COPY text format: psycopg dumps str/Decimal/datetime/date itself; JSON must arrive as text
    # that PostgreSQL parses into jsonb, so we serialise it here.
    if isinstance(field, models.JSONField) and value is not None:
        return json.dumps(value, cls=field.encoder)
    return value


def bulk_load(
    model: type[models.Model],
    rows: Sequence[Mapping[str, Any]],
    *,
    using: str = "default",
    into: str | None = None,
) -> int:
    """Insert rows into model's table (or into ``into``, shaped like it: PostgreSQL only);
    returns the number inserted."""
    if not rows:
        return 0
    connection = connections[using]
    fields = _load_fields(model)
    if connection.vendor == "postgresql":
        return _copy_rows(model, fields, rows, using=using, into=into)
    if into is not None:
        raise ValueError("loading into another table is PostgreSQL's")
    return _insert_rows(model, fields, rows, using=using)


def _insert_rows(
    model: type[models.Model],
    fields: list[models.Field[Any, Any]],
    rows: Sequence[Mapping[str, Any]],
    *,
    using: str,
) -> int:
    """One INSERT statement run with executemany over batches of rows, each value adapted by
    its field as bulk_create would (get_db_prep_save): the same stored values, without
    building a model instance and compiling an INSERT per batch (most of the load's time on
    SQLite). Like the COPY path, a missing key takes the field's default."""
    connection = connections[using]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(str(field.column)) for field in fields)
    marks = ", ".join(["%s"] * len(fields))
    statement = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({marks})"
    defaults = {field.attname: field.get_default() for field in fields}
    prepare = [(field.attname, _preparer(field, connection)) for field in fields]
    with connection.cursor() as cursor:
        for start in range(0, len(rows), SQLITE_BATCH_ROWS):
            cursor.executemany(
                statement,
                [
                    [save(row.get(name, defaults[name])) for name, save in prepare]
                    for row in rows[start : start + SQLITE_BATCH_ROWS]
                ],
            )
    return len(rows)


def _stock(field: models.Field[Any, Any], kind: type[Field[Any, Any]]) -> bool:
    """Whether the field prepares a value for saving with Django's own methods of `kind`."""
    cls = type(field)
    return (
        isinstance(field, kind)
        and cls.get_db_prep_save is Field.get_db_prep_save
        and all(
            getattr(cls, name) is getattr(kind, name)
            for name in ("get_db_prep_value", "get_prep_value", "to_python")
        )
    )


def _stores_int(field: models.Field[Any, Any], ops: type[BaseDatabaseOperations]) -> bool:
    """A stock integer (or auto) field on a backend that stores an int as given."""
    cls = type(field)
    return (
        isinstance(field, models.IntegerField | models.AutoField | models.BigAutoField)
        and cls.get_db_prep_save is Field.get_db_prep_save
        and cls.get_prep_value is models.IntegerField.get_prep_value
        and cls.get_db_prep_value
        in (models.IntegerField.get_db_prep_value, AutoFieldMixin.get_db_prep_value)
        and ops.adapt_integerfield_value is BaseDatabaseOperations.adapt_integerfield_value
        and ops.validate_autopk_value is BaseDatabaseOperations.validate_autopk_value
    )


def _stored_as_given(
    field: models.Field[Any, Any], ops: type[BaseDatabaseOperations]
) -> type | None:
    """The type of value the field hands the backend unchanged (None: none known)."""
    if _stock(field, models.CharField) or _stock(field, models.TextField):
        return str
    if isinstance(field, models.ForeignKey):
        stock = type(field).get_db_prep_save is models.ForeignKey.get_db_prep_save
        return int if stock and _stores_int(field.target_field, ops) else None
    if _stores_int(field, ops):
        return int
    if (
        _stock(field, models.DecimalField)
        and ops.adapt_decimalfield_value is BaseDatabaseOperations.adapt_decimalfield_value
    ):
        return Decimal
    return None


def _preparer(
    field: models.Field[Any, Any], connection: BaseDatabaseWrapper
) -> Callable[[Any], Any]:
    """field.get_db_prep_save(value, connection), with the work skipped where it provably
    returns the value unchanged (the per-value calls were most of a load's time on SQLite): a
    str for a stock CharField or TextField, an int for a stock integer field or a foreign key
    to one, a finite Decimal for a stock DecimalField (this backend takes Decimals as given).
    Dates and aware datetimes are prepared once per distinct value. Any other value, and any
    field that overrides how it prepares values, goes through get_db_prep_save."""
    save = field.get_db_prep_save
    if _stock(field, models.DateTimeField):
        return _memoised(save, connection, datetimes=True)
    if _stock(field, models.DateField):
        return _memoised(save, connection, datetimes=False)
    kind = _stored_as_given(field, type(connection.ops))
    if kind is None:
        return lambda value: save(value, connection)
    if kind is Decimal:

        def decimal(value: Any) -> Any:
            # Decimal(d) of a finite Decimal keeps its digits and exponent: the value as given.
            if value is None or (type(value) is Decimal and value.is_finite()):
                return value
            return save(value, connection)

        return decimal
    plain = kind

    def as_given(value: Any) -> Any:
        if value is None or type(value) is plain:
            return value
        return save(value, connection)

    return as_given


def _memoised(
    save: _Save,
    connection: BaseDatabaseWrapper,
    *,
    datetimes: bool,
) -> Callable[[Any], Any]:
    """save(value) of each distinct date (or aware datetime: equal instants are stored alike),
    computed once per load."""
    done: dict[Any, Any] = {}
    wanted = dt.datetime if datetimes else dt.date

    def prepared(value: Any) -> Any:
        if type(value) is not wanted or (isinstance(value, dt.datetime) and value.tzinfo is None):
            return save(value, connection)
        try:
            return done[value]
        except KeyError:
            done[value] = result = save(value, connection)
            return result

    return prepared


def _copy_rows(
    model: type[models.Model],
    fields: list[models.Field[Any, Any]],
    rows: Sequence[Mapping[str, Any]],
    *,
    using: str,
    into: str | None,
) -> int:
    connection = connections[using]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(str(field.column)) for field in fields)
    statement = f"COPY {quote(into or model._meta.db_table)} ({columns}) FROM STDIN"
    defaults = {field.attname: field.get_default() for field in fields}
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(
                [
                    _copy_value(field, row.get(field.attname, defaults[field.attname]))
                    for field in fields
                ]
            )
    return len(rows)


def bulk_load_table(
    model: type[models.Model],
    table: Any,
    *,
    constants: Mapping[str, Any],
    using: str = "default",
    into: str | None = None,
) -> int:
    """Insert a pyarrow Table of rows (columns named by attname, JSON fields as JSON text,
    every other column taking constants[attname] or the field default) with one COPY in CSV
    form written by pyarrow: no Python work per row. Into model's table, or ``into`` (a table
    shaped like it). PostgreSQL only (see bulk_load)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    from billing_ingest.parsers.columnar import constant_column

    length = table.num_rows
    if not length:
        return 0
    fields = _load_fields(model)
    columns = []
    for field in fields:
        if field.attname in table.column_names:
            columns.append(table.column(field.attname))
        elif field.attname in constants:
            columns.append(pa.repeat(pa.scalar(constants[field.attname]), length))
        else:
            columns.append(constant_column(field.attname, field.get_default(), length))
        if pa.types.is_timestamp(columns[-1].type):
            columns[-1] = _utc_text(columns[-1])
    ordered = pa.table(columns, names=[str(field.column) for field in fields])
    connection = connections[using]
    quote = connection.ops.quote_name
    names = ", ".join(quote(str(field.column)) for field in fields)
    # CSV as pyarrow writes it: every string quoted (so "" stays an empty string), nulls as
    # an unquoted empty field (NULL to COPY), decimals in full, timestamps with a Z.
    statement = f"COPY {quote(into or model._meta.db_table)} ({names}) FROM STDIN (FORMAT csv)"
    options = pa_csv.WriteOptions(include_header=False, quoting_style="needed")
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for start in range(0, length, _COPY_SLICE_ROWS):
            sink = pa.BufferOutputStream()
            pa_csv.write_csv(ordered.slice(start, _COPY_SLICE_ROWS), sink, options)
            copy.write(sink.getvalue())
    return int(length)


def _utc_text(column: Any) -> Any:
    """A UTC timestamp column as COPY text with an explicit Z: pyarrow formats naive
    timestamps ten times faster than zoned ones, and the Z keeps the session time zone out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    naive = pc.cast(column, pa.timestamp(column.type.unit))
    return pc.binary_join_element_wise(pc.cast(naive, pa.string()), "Z", "")


# Rows per CSV block handed to COPY: a few MB, so the server starts on a chunk while the rest
# of it is still being written.
_COPY_SLICE_ROWS = 10_000
