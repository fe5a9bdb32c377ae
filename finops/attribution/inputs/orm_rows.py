"""Reading a values_list queryset fast: the ORM's own converters, applied per column, with
the columns that repeat (charge periods) converted once per distinct database value, and raw
columns (JSON text, or on PostgreSQL every column: psycopg already hands out what the ORM's
converters return there) left to the caller. Attribution reads a whole month of line items and
jobs this way (inputs/month.py, inputs/jobs.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.db import models
from django.db.models.sql.constants import MULTI

# values_rows(raw=ALL): every column as the driver hands it out.
ALL = ("*",)

_Plain = list[tuple[int, list[Any], Any]]
_Cached = list[tuple[int, list[Any], Any, dict[Any, Any]]]


def _selected_names(queryset: models.QuerySet[Any], compiler: Any) -> list[str]:
    """Column names in the compiler's order (the aliases it selects them as)."""
    names = [alias for _, _, alias in compiler.select[: compiler.col_count]]
    if None in names:
        query = queryset.query
        names = [*query.extra_select, *query.values_select, *query.annotation_select]
    return names


def _converters(
    compiler: Any, names: list[str], memoised: Iterable[str], raw: Iterable[str]
) -> tuple[_Plain, _Cached]:
    """The ORM's converters by column position: plain ones, and memoised ones with a memo
    (none for the raw columns)."""
    fields = [expression for expression, _, _ in compiler.select[: compiler.col_count]]
    memo_at = {names.index(name) for name in memoised if name in names}
    raw_at = (
        set(range(len(names)))
        if tuple(raw) == ALL
        else {names.index(name) for name in raw if name in names}
    )
    plain: _Plain = []
    cached: _Cached = []
    for pos, (convs, expression) in compiler.get_converters(fields).items():
        if pos in raw_at:
            continue
        if pos in memo_at:
            cached.append((pos, convs, expression, {}))
        else:
            plain.append((pos, convs, expression))
    return plain, cached


def values_rows(
    queryset: models.QuerySet[Any],
    memoised: Iterable[str],
    *,
    chunk_size: int,
    raw: Iterable[str] = (),
) -> Iterator[tuple[Any, ...]]:
    """The value tuples of a values_list queryset, as the ORM would convert them, read in
    chunks; the columns named in memoised are converted once per distinct database value, those
    named in raw not at all (as the driver hands them out: the caller converts them; ALL: every
    column). With no converter left, the driver's tuples are handed out as they are.

    Charge periods repeat (744 hours a month over hundreds of thousands of lines) and so do
    tags, while the ORM converts every cell (on SQLite: parse the datetime text, make it aware,
    json.loads the tags): for a month's line items that alone cost more than reading them."""
    compiler = queryset.query.get_compiler(using=queryset.db)
    # As QuerySet.iterator(): a server-side cursor on PostgreSQL unless settings disable them.
    chunked = not compiler.connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    results = compiler.execute_sql(MULTI, chunked_fetch=chunked, chunk_size=chunk_size)
    assert results is not None
    names = _selected_names(queryset, compiler)
    wanted = list(queryset._fields or names)  # type: ignore[attr-defined]
    order = [names.index(name) for name in wanted]
    reorder = order != list(range(len(order)))
    plain, cached = _converters(compiler, names, memoised, raw)
    connection = compiler.connection
    if not plain and not cached and not reorder:
        for chunk in results:
            yield from chunk
        return
    # The per-row loop stays inline: it runs for every cell of a month's line items.
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
