"""The ledger's rows written to PostgreSQL as columns (issue 34): integer columns by one binary
COPY, the text of each distinct name once, and one INSERT ... SELECT on the server that makes
the stored values (numeric money, dates, names), instead of a tuple of Decimals, dates and
strings per row adapted by psycopg (rows.ledger_values).

Exact: money travels as whole units and fractional units of 10^-12 (hi, lo = divmod(units,
10^12), so any amount the money columns hold fits two int64), rebuilt by the server as hi +
lo / 10^12; GPU-seconds (quantised to 10^-6 by writer.finish) likewise. A value that would not
fit (none the columns can hold) raises OverflowError rather than be cut.

Names (node, run id, category, the dims' texts) go once each into scratch lookup tables and the
rows carry their index; ids that may be None (team, job) carry -1, which no id is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from django.db import connection

from finops.attribution.inputs.month import Inputs
from finops.attribution.ledger.rollup_sums import Ledger
from finops.attribution.ledger.rows import ledger_names
from finops.core.pg_binary_copy import bigint_copy_encode

I64 = npt.NDArray[np.int64]
_ONE = 10**12
_MICRO = 10**6
_NONE = -1
# Scratch tables, dropped at the end (temporary: the session's own).
_ROWS = "ledger_copy_rows"
_NAMES = "ledger_copy_names"
_DIMS = "ledger_copy_dims"
_ROW_COLUMNS = (
    "dims", "day", "category", "team", "job", "run", "node", "amount_hi", "amount_lo",
    "seconds_hi", "seconds_lo", "list_hi", "list_lo", "contracted_hi", "contracted_lo",
)  # fmt: skip
_K = TypeVar("_K", bound=Hashable)


def _codes(values: Sequence[_K]) -> tuple[I64, list[_K]]:
    """Each value's index in the list of distinct values (in first-seen order)."""
    index: dict[_K, int] = {}
    for value in values:
        if value not in index:
            index[value] = len(index)
    codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
    return codes, list(index)


def _hi_lo(values: Sequence[int], scale: int) -> tuple[I64, I64]:
    """divmod(value, scale) of each integer, as two int64 columns (OverflowError if the whole
    part does not fit)."""
    try:
        array = np.array(values, dtype=np.int64)
    except OverflowError:
        pairs = [divmod(value, scale) for value in values]
        return (
            np.array([high for high, _ in pairs], dtype=np.int64),
            np.array([low for _, low in pairs], dtype=np.int64),
        )
    high, low = np.divmod(array, scale)
    return high, low


def _ids(values: Sequence[int | None]) -> I64:
    return np.fromiter(
        (_NONE if v is None else v for v in values), dtype=np.int64, count=len(values)
    )


def ledger_columns(inputs: Inputs, ledger: Ledger) -> tuple[list[I64], dict[str, list[Any]]]:
    """The ledger's rows as int64 columns (_ROW_COLUMNS) and the names they index: 'text'
    (categories, run ids and nodes share one list) and 'dims' (inputs.dims)."""
    keys = list(ledger)
    values = list(ledger.values())
    # Comprehensions, not zip(*keys): a few times faster with hundreds of thousands of rows.
    dims_i, day = [key[0] for key in keys], [key[1] for key in keys]
    category, node = [key[2] for key in keys], [key[5] for key in keys]
    team, job = [key[3] for key in keys], [key[4] for key in keys]
    units, seconds, list_units, contracted_units = ([v[i] for v in values] for i in range(4))
    job_meta = inputs.job_meta
    runs = [job_meta[j].run_id if j is not None else "" for j in job]
    text_codes, texts = _codes([*category, *runs, *node])
    n = len(keys)
    micro = [int(s.scaleb(6)) if s else 0 for s in seconds]
    columns = [
        np.array(dims_i, dtype=np.int64), np.array(day, dtype=np.int64), text_codes[:n],
        _ids(team), _ids(job), text_codes[n : 2 * n], text_codes[2 * n :],
        *_hi_lo(units, _ONE), *_hi_lo(micro, _MICRO), *_hi_lo(list_units, _ONE),
        *_hi_lo(contracted_units, _ONE),
    ]  # fmt: skip
    return columns, {"text": texts, "dims": list(inputs.dims)}


def ledger_copy(table: str, month: dt.date, inputs: Inputs, ledger: Ledger) -> None:
    """Insert the ledger's rows into table (the ledger's columns; PostgreSQL), as columns
    (module docstring), inside the caller's transaction."""
    if not ledger:
        return
    columns, names = ledger_columns(inputs, ledger)
    quote = connection.ops.quote_name
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        cursor.execute(
            f"CREATE TEMP TABLE {_ROWS} ({', '.join(f'{c} bigint' for c in _ROW_COLUMNS)})"
        )
        cursor.execute(f"CREATE TEMP TABLE {_NAMES} (ix bigint, name text)")
        dims_columns = (
            "provider, account, sub_account, service, pricing, currency, batch, mix, source"
        )
        cursor.execute(
            f"CREATE TEMP TABLE {_DIMS} (ix bigint, provider text, account text, "
            "sub_account text, service text, pricing text, currency text, batch bigint, "
            "mix text, source text)"
        )
        with cursor.copy(f"COPY {_NAMES} (ix, name) FROM STDIN") as copy:
            for i, name in enumerate(names["text"]):
                copy.write_row((i, name))
        with cursor.copy(f"COPY {_DIMS} (ix, {dims_columns}) FROM STDIN") as copy:
            for i, dims in enumerate(names["dims"]):
                copy.write_row((i, *dims))
        with cursor.copy(f"COPY {_ROWS} FROM STDIN (FORMAT binary)") as copy:
            copy.write(bigint_copy_encode(columns))
        for scratch in (_ROWS, _NAMES, _DIMS):
            cursor.execute(f"ANALYZE {scratch}")
        targets = ", ".join(quote(name) for name in ledger_names())
        cursor.execute(
            f"INSERT INTO {quote(table)} ({targets}) SELECT %s, DATE '1970-01-01' + r.day::int, "
            "c.name, nullif(r.team, -1), nullif(r.job, -1), u.name, n.name, d.provider, "
            "d.account, d.sub_account, d.service, d.pricing, d.currency, d.batch, d.mix, "
            "d.source, r.amount_hi + r.amount_lo::numeric / 1000000000000, "
            "r.seconds_hi + r.seconds_lo::numeric / 1000000, "
            "r.list_hi + r.list_lo::numeric / 1000000000000, "
            "r.contracted_hi + r.contracted_lo::numeric / 1000000000000 "
            f"FROM {_ROWS} AS r JOIN {_DIMS} AS d ON d.ix = r.dims "
            f"JOIN {_NAMES} AS c ON c.ix = r.category JOIN {_NAMES} AS u ON u.ix = r.run "
            f"JOIN {_NAMES} AS n ON n.ix = r.node",
            [month],
        )
        cursor.execute(f"DROP TABLE {_ROWS}, {_NAMES}, {_DIMS}")
