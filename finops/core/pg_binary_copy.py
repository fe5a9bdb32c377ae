"""PostgreSQL's binary COPY format for rows of non-null bigint columns, as NumPy arrays: what
the ledger's columnar write sends (attribution/ledger/copy_columns.py) and the column read of
the line items receives (attribution/inputs/line_columns.py). A row is a 16-bit field count,
then per field a 32-bit length (8) and the big-endian value; the file has a fixed header and a
-1 trailer (https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format")."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8
TRAILER = b"\xff\xff"


def bigint_rows_dtype(n: int) -> np.dtype[Any]:
    """One COPY row of n non-null bigint fields."""
    fields: list[tuple[str, str]] = [("count", ">i2")]
    for i in range(n):
        fields += [(f"l{i}", ">i4"), (f"v{i}", ">i8")]
    return np.dtype(fields)


def bigint_copy_encode(columns: list[I64]) -> bytes:
    """Equal-length int64 columns as a binary COPY FROM STDIN stream."""
    rows = np.empty(len(columns[0]), dtype=bigint_rows_dtype(len(columns)))
    rows["count"] = len(columns)
    for i, column in enumerate(columns):
        rows[f"l{i}"] = 8
        rows[f"v{i}"] = column
    return HEADER + rows.tobytes() + TRAILER


def bigint_copy_decode(data: bytes, n: int) -> list[I64]:
    """A binary COPY TO STDOUT stream of n non-null bigint fields per row, as n int64 columns."""
    body = memoryview(data)[len(HEADER) : len(data) - len(TRAILER)]
    rows = np.frombuffer(body, dtype=bigint_rows_dtype(n))
    return [rows[f"v{i}"].astype(np.int64) for i in range(n)]
