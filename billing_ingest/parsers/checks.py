"""Checks of a file's text and header that every CSV-like billing parser shares: cells holding
a NUL or bytes that are not UTF-8, and a column the parser reads appearing twice.

Files are opened with errors="surrogateescape" (see values.open_text), so a byte that is not
UTF-8 reaches the cell it is in as a lone surrogate instead of failing the decoder, which reads
ahead in 8 KB blocks and so cannot say which row the byte was on. These checks then name the
row and the column. Both would otherwise be stored (NUL and surrogates are text to Python) or
fail the database load of a whole chunk, naming no row.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from finops.core.errors import ImportFormatError
from finops.core.wording import plural

_SURROGATES = range(0xDC80, 0xDD00)  # surrogateescape's stand-ins for bytes 0x80-0xff


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def text_problem(cells: Sequence[str]) -> tuple[int, str] | None:
    """(position, problem) of the first cell holding a NUL or a byte that was not UTF-8, or
    None. A clean row costs one join and two C-speed scans."""
    joined = "".join(cells)
    if "\x00" not in joined and (joined.isascii() or _utf8(joined)):
        return None
    for position, cell in enumerate(cells):
        if "\x00" in cell:
            return position, "contains a NUL character"
        if not _utf8(cell):
            byte = next(ord(c) - 0xDC00 for c in cell if ord(c) in _SURROGATES)
            return position, f"is not valid UTF-8 (byte 0x{byte:02x}); the file must be UTF-8"
    return None


def check_cells(
    cells: Sequence[str], *, file_label: str, row: int, header: Sequence[str] | None = None
) -> None:
    """ImportFormatError naming the row and column of a cell with a NUL or non-UTF-8 byte.
    The column is its header name, or its 1-based position where there is none."""
    problem = text_problem(cells)
    if problem is None:
        return
    position, message = problem
    if header is not None and position < len(header):
        column = header[position].strip()
    else:
        column = str(position + 1)
    raise ImportFormatError(message, file=file_label, row=row, column=column)


def check_unique_columns(
    header: Sequence[str],
    positions: Iterable[int],
    *,
    file_label: str,
    key: Callable[[str], str] = lambda name: name.strip().lower(),
) -> None:
    """ImportFormatError when a column the parser reads (at one of positions) appears more than
    once under the parser's idea of "the same name" (key): which copy holds the data is then a
    guess. Duplicates among columns the parser ignores are left alone."""
    counts = Counter(key(name) for name in header)
    for position in sorted(positions):
        name = key(header[position])
        if counts[name] > 1:
            where = [str(i + 1) for i, other in enumerate(header) if key(other) == name]
            raise ImportFormatError(
                f"appears more than once in the header (columns {' and '.join(where)}); "
                "which one holds the data is ambiguous",
                file=file_label,
                column=header[position].strip(),
            )


def _first_nul(array: Any, name: str) -> tuple[int, str] | None:
    """(row index, dotted column name) of the first NUL in a string array, looking into structs,
    lists and maps (a Parquet string is valid UTF-8 but may hold a NUL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        mask = pc.match_substring(array, "\x00")
        if pc.any(mask).as_py():
            return int(pc.index(mask, True).as_py()), name
        return None
    if pa.types.is_struct(kind):
        for i in range(kind.num_fields):
            found = _first_nul(array.field(i), f"{name}.{kind.field(i).name}")
            if found is not None:
                return found
        return None
    if pa.types.is_map(kind):
        children = [array.keys, array.items]
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        children = [array.values]
    else:
        return None
    # The children are the whole child arrays; this array's entries are offsets[0]:offsets[-1]
    # of them. (pc.list_parent_indices aborts the process on a map array.)
    start, end = array.offsets[0].as_py(), array.offsets[-1].as_py()
    for child in children:
        found = _first_nul(child.slice(start, end - start), name)
        if found is not None:
            return bisect_right(array.offsets.to_pylist(), start + found[0]) - 1, found[1]
    return None


def check_record_batch(batch: Any, *, first_row: int, file_label: str) -> None:
    """ImportFormatError naming the row (first_row + index) and column of a NUL in a Parquet
    record batch: one C-speed scan per string column, instead of a check per cell."""
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        found = _first_nul(column, name)
        if found is not None:
            index, where = found
            raise ImportFormatError(
                "contains a NUL character", file=file_label, row=first_row + index, column=where
            )


def missing_columns_error(
    kind: str, missing: Sequence[str], *, file_label: str, row: int | None = None
) -> ImportFormatError:
    """A header without columns the format requires: names every one missing (``kind``: the
    format, as "FOCUS"), the first as the error's column."""
    return ImportFormatError(
        f"missing required {kind} {plural('column', len(missing))}: {', '.join(missing)}",
        file=file_label,
        row=row,
        column=missing[0],
    )
