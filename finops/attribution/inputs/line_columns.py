"""The month's line items read as columns (issue 34, PostgreSQL): the lines of GPU nodes come as
one binary COPY of integers (no Python value per cell), the rest as rows, as before.

Reading 744,000 hourly node lines as rows of 28 columns made a Python value of every cell (a
Decimal of every amount, a string of every name) and looked up each line's billed resource by a
tuple of 24 of them: most of the attribution step's read. A line's resource columns are what
LineStager resolves once per resource anyway, so here:

1. every line comes by one binary COPY as bigints: id, a digest of its resource columns (md5 of
   the ROW of the columns LineStager's resource key takes, as two 60-bit halves), the charge
   period in epoch microseconds, EffectiveCost, ListCost and ContractedCost in units of 10^-12
   (each with a null flag where the column may be null), the quantity likewise, and a flag for
   amounts too large for 64 bits;
2. the lines are grouped by digest (NumPy) and each resource's first line is read and staged as
   a row (LineStager.stage_all), which resolves every resource: node, GPUs, owner, dims, unused
   commitment, rollups;
3. the lines of GPU node resources (node, known GPU count, not an unused commitment) whose
   amounts fit go into a LineBlock, their on-demand equivalent and ledger dims resolved once per
   distinct (resource, amounts, period) as stage_all does; every other line is read again as a
   row by id and staged as before.

Exactness: two resources are taken for one only if their digests agree on 120 bits; if two
resources share the first 60 (about 1 in 10^8 months of a hundred thousand resources) the whole
month is read as rows. Amounts are exact integers (the
columns have 12 decimals); the per-line values equal the row path's (tests compare the ledgers).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt
from django.db import connections, models
from django.db.models.expressions import RawSQL

from billing_ingest.models import CostLineItem
from finops.attribution.engine.line_block import AMOUNT_LIMIT, LineBlock, LineTemplate
from finops.attribution.engine.units import MONEY_PLACES, decimal_to_units
from finops.attribution.inputs.line_staging import (
    LINE_FIELDS,
    RESOURCE_AT,
    TAKES_COST,
    TAKES_LIST,
    LineStager,
    Staged,
)
from finops.core.pg_binary_copy import bigint_copy_decode
from finops.core.sql_arrays import AnyOf

I64 = npt.NDArray[np.int64]
_MICRO = 10**6
# Amounts past this (in the currency) are flagged and read as rows: AMOUNT_LIMIT units, less a
# margin. Quantities have 12 decimals too and fit bigint below about 9.2 million.
_AMOUNT_MAX = int(AMOUNT_LIMIT // 10**MONEY_PLACES) - 1
_QUANTITY_MAX = 9_000_000


def _table_column(name: str) -> str:
    field = CostLineItem._meta.get_field(name)
    quote = connections[CostLineItem.objects.db].ops.quote_name
    column = str(field.column)  # type: ignore[union-attr]
    return f"{quote(CostLineItem._meta.db_table)}.{quote(column)}"


def _digest_sql() -> str:
    columns = ", ".join(_table_column(LINE_FIELDS[at]) for at in RESOURCE_AT)
    return f"md5(ROW({columns})::text)"


def _units_sql(name: str, limit: int) -> tuple[str, str]:
    """(the column in units of 10^-12 as bigint, 0 when null or out of range; 1 when null)."""
    column = _table_column(name)
    units = f"CASE WHEN abs({column}) < {limit} THEN ({column} * 1000000000000)::bigint ELSE 0 END"
    return f"coalesce({units}, 0)", f"({column} IS NULL)::int::bigint"


def _wide_sql() -> str:
    checks = [
        f"coalesce(abs({_table_column(name)}) >= {limit}, false)"
        for name, limit in (
            ("effective_cost", _AMOUNT_MAX), ("list_cost", _AMOUNT_MAX),
            ("contracted_cost", _AMOUNT_MAX), ("consumed_quantity", _QUANTITY_MAX),
        )
    ]  # fmt: skip
    return f"({' OR '.join(checks)})::int::bigint"


def _epoch_micros_sql(name: str) -> str:
    return f"(extract(epoch FROM {_table_column(name)}) * 1000000)::bigint"


def _columns_sql() -> list[str]:
    cost, _ = _units_sql("effective_cost", _AMOUNT_MAX)
    list_units, list_null = _units_sql("list_cost", _AMOUNT_MAX)
    contracted, _ = _units_sql("contracted_cost", _AMOUNT_MAX)  # null is 0, as in the rows
    quantity, quantity_null = _units_sql("consumed_quantity", _QUANTITY_MAX)
    return [
        _digest_sql(),
        _epoch_micros_sql("charge_period_start"),
        _epoch_micros_sql("charge_period_end"),
        cost, list_units, list_null, contracted, quantity, quantity_null,
        _wide_sql(),
    ]  # fmt: skip


@dataclass(slots=True)
class _Lines:
    """Every line of the read, as columns (module docstring, step 1)."""

    id: I64
    key: I64
    key2: I64
    start_us: I64
    end_us: I64
    cost: I64
    list_units: I64
    list_null: I64
    contracted: I64
    quantity: I64
    quantity_null: I64
    wide: I64


def _copy_lines(queryset: models.QuerySet[Any]) -> _Lines:
    """Every line of the queryset (id order) as columns by one binary COPY of bigints: the
    digest (computed once per line) as two 60-bit halves, then _columns_sql's other columns."""
    expressions = _columns_sql()
    inner = queryset.values_list("id", *(RawSQL(sql, ()) for sql in expressions))
    sql, params = inner.query.get_compiler(using=queryset.db).as_sql()
    names = ["id", "digest", *(f"c{i}" for i in range(1, len(expressions)))]
    selected = [
        "s.id",
        "('x' || left(s.digest, 15))::bit(60)::bigint",
        "('x' || substr(s.digest, 16, 15))::bit(60)::bigint",
        *(f"s.{name}" for name in names[2:]),
    ]
    statement = (
        f"COPY (SELECT {', '.join(selected)} FROM ({sql}) AS s({', '.join(names)})) "
        "TO STDOUT (FORMAT binary)"
    )
    with (
        connections[queryset.db].cursor() as django_cursor,
        django_cursor.cursor.copy(statement, params) as copy,
    ):
        data = b"".join(bytes(chunk) for chunk in copy)
    columns = bigint_copy_decode(data, len(selected))
    # In id order (the subquery's; sorting here rather than by the server, which sorts the
    # wide rows again: an outer ORDER BY does not know the inner one holds).
    order = np.argsort(columns[0], kind="stable")
    return _Lines(*(column[order] for column in columns))


def distinct_resources(lines: _Lines) -> tuple[I64, I64] | None:
    """(index of each distinct resource's first line, each line's resource) by the digest; None
    when two resources share the first half of their digests (the check that a 60-bit half
    never stands for two resources, so that a collision of the whole digest, 120 bits, is the
    only one left unseen)."""
    _, first, which = np.unique(lines.key, return_index=True, return_inverse=True)
    which = which.reshape(-1)
    # One resource per first half: the second half is its first line's on every line.
    if not np.array_equal(lines.key2, lines.key2[first][which]):
        return None
    return first.astype(np.int64), which.reshape(-1).astype(np.int64)


# Odd multipliers of the columns' fingerprint (_distinct_rows).
_MIX = np.array([0x9E3779B97F4A7C15 - 2**64, 0xBF58476D1CE4E5B9 - 2**64, 0x94D049BB133111EB - 2**64,
                 0x2545F4914F6CDD1D, 0x5851F42D4C957F2D, 0x14057B7EF767814F, 0x6C62272E07BB0143],
                dtype=np.int64)  # fmt: skip


def _distinct_rows(matrix: I64) -> tuple[I64, I64]:
    """np.unique(matrix, axis=0, return_inverse=True), faster: the rows are grouped by a
    fingerprint (a wrapping sum of their columns times odd constants) and every row checked
    equal to its group's first; only if two distinct rows share a fingerprint are they sorted
    as rows. The distinct rows come in order of first appearance."""
    with np.errstate(over="ignore"):
        fingerprint = (matrix * _MIX[: matrix.shape[1]]).sum(axis=1)
    _, first, which = np.unique(fingerprint, return_index=True, return_inverse=True)
    which = which.reshape(-1)
    if not np.array_equal(matrix, matrix[first][which]):
        distinct, which = np.unique(matrix, axis=0, return_inverse=True)
        return distinct, which.reshape(-1)
    return matrix[first], which


def _epoch_seconds(micros: I64) -> I64:
    """int() of the epoch seconds (toward zero), as to_epoch gives them."""
    seconds: I64 = np.where(micros >= 0, micros // _MICRO, -((-micros) // _MICRO))
    return seconds


def _decimal(units: int, places: int = MONEY_PLACES) -> Decimal:
    """A column's value as psycopg gives it (numeric with 12 decimals)."""
    return Decimal(units).scaleb(-places)


def stage_columns(
    stager: LineStager, base: models.QuerySet[Any], rows_of: Any
) -> tuple[list[Staged], LineBlock] | None:
    """The lines of base (a queryset of the month's or a part's line items, in id order) staged
    by the column read: the staged rows of the lines read as rows, the GPU node lines as a
    LineBlock (its templates, one per resource, filled by block_templates once teams exist).
    rows_of(queryset) gives LineStager's value tuples of a queryset's lines (month._rows_of).
    None: the month must be read as rows (a digest shared by two resources)."""
    lines = _copy_lines(base)
    if not len(lines.id):
        return [], LineBlock.empty()
    found = distinct_resources(lines)
    if found is None:
        return None
    first, which = found
    first_ids = lines.id[first]
    staged = stager.stage_all(rows_of(base.filter(AnyOf("id", first_ids.tolist()))))
    at_of_id = {row[0]: row[6] for row in staged}
    at = np.array([at_of_id[i] for i in first_ids.tolist()], dtype=np.int64)[which]
    resources = stager.resources
    eligible = np.array(
        [r.node is not None and bool(r.gpus) and r.unused is None for r in resources],
        dtype=np.bool_,
    )
    first_mask = np.zeros(len(lines.id), dtype=np.bool_)
    first_mask[first] = True
    on_block = eligible[at] & (lines.wide == 0) & ~first_mask if len(at) else first_mask
    others = lines.id[~on_block & ~first_mask].tolist()
    if others:
        staged += stager.stage_all(rows_of(base.filter(AnyOf("id", others))))
        staged.sort(key=lambda row: row[0])  # in id order, as the row read stages them
    chosen = np.flatnonzero(on_block)
    return staged, _block(stager, lines, at, chosen)


def _block(stager: LineStager, lines: _Lines, at: I64, chosen: I64) -> LineBlock:
    """The chosen lines as a LineBlock (templates left empty; a line's template index is its
    resource's)."""
    start_us, end_us = lines.start_us[chosen], lines.end_us[chosen]
    start, end = _epoch_seconds(start_us), _epoch_seconds(end_us)
    cost, list_units = lines.cost[chosen], lines.list_units[chosen]
    list_null, quantity = lines.list_null[chosen], lines.quantity[chosen]
    quantity_null, line_at = lines.quantity_null[chosen], at[chosen]
    # The on-demand equivalent and dims once per distinct (resource, amounts, period), as
    # LineStager._amount is asked once per distinct row amounts.
    amounts = np.stack(
        [line_at, list_units, list_null, cost, quantity, quantity_null, end - start], axis=1
    )
    distinct, which = _distinct_rows(amounts)
    taken_of: list[int] = []
    value_of: list[int] = []
    group_of: list[int] = []
    resources = stager.resources
    for r, lu, ln, c, q, qn, period in distinct.tolist():
        cost_value = _decimal(c)
        list_value = None if ln else _decimal(lu)
        source, estimate, dims = stager.amount_of(
            resources[r], list_value, cost_value, None if qn else _decimal(q), period
        )
        taken_of.append(source)
        value_of.append(decimal_to_units(estimate) if source not in (TAKES_LIST, TAKES_COST) else 0)
        group_of.append(dims)
    taken = np.array(taken_of, dtype=np.int64)[which]
    list_column = np.where(
        taken == TAKES_LIST, list_units,
        np.where(taken == TAKES_COST, cost, np.array(value_of, dtype=np.int64)[which]),
    )  # fmt: skip
    contracted = lines.contracted[chosen]
    group = np.array(group_of, dtype=np.int64)[which]
    _charges(stager, line_at, start_us, end_us, cost)
    return LineBlock(
        lines.id[chosen], start, end, cost, list_column, contracted, group, line_at, [],
    )  # fmt: skip


def _charges(stager: LineStager, at: I64, start_us: I64, end_us: I64, cost: I64) -> None:
    """The budget rollups of the block's lines whose resource feeds them (tags or a recurring
    charge category), line by line as stage_all adds them."""
    resources = stager.resources
    charged = np.array([r.charged for r in resources], dtype=np.bool_)
    if not len(at) or not charged.any():
        return
    for i in np.flatnonzero(charged[at]).tolist():
        stager.charge(
            resources[int(at[i])], _decimal(int(start_us[i]), 6), _decimal(int(end_us[i]), 6),
            _decimal(int(cost[i])),
        )  # fmt: skip


def block_templates(block: LineBlock, owners: list[tuple[Any, ...]]) -> LineBlock:
    """The block with its templates: one per resource, from engine_lines' per-resource owners
    (node, GPUs, category, team, spread pool, shared-cost rule, provider, currency)."""
    block.templates = [
        LineTemplate(node, gpus, category, team_id, pool, provider, currency)
        for node, gpus, category, team_id, pool, _, provider, currency in owners
    ]
    return block
