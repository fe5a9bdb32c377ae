"""pyarrow readers the billing parsers share: Parquet files read one record batch at a time
(parquet_chunks, through ParquetRow views), and the columnar fast path for large CSV files.

pyarrow is imported inside the functions, so a parser that never meets Parquet or a large CSV
does not pay for importing it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any, Protocol, cast

from django.db import models

from billing_ingest.models import CostLineItem
from billing_ingest.parsers import LineItemChunks
from billing_ingest.parsers.bounds import gzip_budget
from billing_ingest.parsers.checks import check_record_batch
from billing_ingest.parsers.rows import LineItemRow
from billing_ingest.parsers.values import BadValue
from finops.core.errors import ImportFormatError

# --------------------------------------------------------------------------- Parquet


class RowBuilder(Protocol):
    """What parquet_chunks needs of a parser's row builder."""

    def positions(self) -> Iterable[int]:
        """Header positions build() reads (Parquet reads only these columns)."""
        ...

    def build(self, cells: Sequence[object], row_number: int, /) -> LineItemRow: ...


class ParquetRow(Sequence[object]):
    """A row view over column lists: only the columns the plan reads are materialised.

    Lets a row builder written for CSV cells (index by header position) read Parquet record
    batches without building a full row per record."""

    def __init__(self, columns: dict[int, list[object]], index: int, width: int) -> None:
        self._columns = columns
        self._index = index
        self._width = width

    def __len__(self) -> int:
        return self._width

    def __getitem__(self, position: int) -> object:  # type: ignore[override]
        column = self._columns.get(position)
        return None if column is None else column[self._index]


def parquet_chunks(
    path: Path,
    *,
    file_label: str,
    chunk_size: int,
    make_builder: Callable[[Sequence[str]], RowBuilder],
) -> LineItemChunks:
    """One chunk of line-item dicts per record batch (at most chunk_size rows) of a Parquet
    file, built by make_builder(header); only the columns the builder reads are loaded. Errors
    name the file and the first row of the batch that failed; a file without rows is one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise ImportFormatError(f"cannot read Parquet ({exc})", file=file_label) from None
    header = list(parquet.schema_arrow.names)
    builder = make_builder(header)
    wanted = sorted(builder.positions())
    first_row = 1
    seen = False
    try:
        batches = parquet.iter_batches(batch_size=chunk_size, columns=[header[i] for i in wanted])
        for record_batch in batches:
            check_record_batch(record_batch, first_row=first_row, file_label=file_label)
            columns = {pos: record_batch.column(k).to_pylist() for k, pos in enumerate(wanted)}
            chunk = [
                builder.build(ParquetRow(columns, i, len(header)), first_row + i)
                for i in range(record_batch.num_rows)
            ]
            first_row += record_batch.num_rows
            if chunk:
                seen = True
                yield chunk
    except pa.ArrowException as exc:
        raise ImportFormatError(
            f"cannot read Parquet ({exc})", file=file_label, row=first_row
        ) from None
    if not seen:
        raise ImportFormatError("file has no data rows", file=file_label)


# --------------------------------------------------------------------------- columnar fast path
#
# Per-cell Python tops out near 30k rows/s. The fast path reads CSV with pyarrow (C++) in
# blocks and converts column by column: money by an exact decimal cast, everything that repeats
# (timestamps, ids, currencies, tags, line item types) by converting each distinct value once
# through the very converters above and spreading the results back. Whatever it is not sure of
# (a value the cast refuses, an error to report, odd CSV) raises FallBack, and the parser redoes
# the file with the per-row path, which then produces the same rows or the exact error message.


class FallBack(Exception):
    """The columnar path met something only the per-row path may judge or report."""


# Only plain decimal text is cast by pyarrow; anything else (exponents, "+1", NaN, spaces)
# goes through parse_money/parse_quantity value by value.
_PLAIN_DECIMAL_RE = r"^(-?[0-9]+(\.[0-9]+)?|NULL|null|)$"
_NULL_TEXT_RE = r"^(NULL|null|)$"
# 1 MB blocks parse faster than larger ones (cache-sized); rows are regrouped into chunks.
ARROW_BLOCK_BYTES = 1 << 20


def arrow_type(field_name: str) -> Any:
    """The pyarrow type a CostLineItem field is held in by the fast path (JSON as text)."""
    import pyarrow as pa

    field = CostLineItem._meta.get_field(field_name)
    if isinstance(field, models.DateTimeField):
        return pa.timestamp("us", tz="UTC")
    if isinstance(field, models.DateField):
        return pa.date32()
    if isinstance(field, models.DecimalField):
        assert field.max_digits is not None and field.decimal_places is not None
        return pa.decimal128(field.max_digits, field.decimal_places)
    if isinstance(field, models.IntegerField):
        return pa.int32()
    return pa.string()


def _is_json(field_name: str) -> bool:
    return isinstance(CostLineItem._meta.get_field(field_name), models.JSONField)


def constant_column(field_name: str, value: object, length: int) -> Any:
    import pyarrow as pa

    column_type = arrow_type(field_name)
    if value is None:
        return pa.nulls(length, column_type)
    if _is_json(field_name):
        value = json.dumps(value)
    return pa.repeat(pa.scalar(value, type=column_type), length)


def unique_results(arrays: Sequence[Any], convert: Any) -> tuple[list[Any], Any]:
    """convert(*cells) once per distinct combination of cells across the given string arrays:
    (results, indices) where results[indices[i]] is row i's result. BadValue -> FallBack."""
    import pyarrow.compute as pc

    if len(arrays) == 1:
        keys = arrays[0]
    else:
        # \x00 joins the cells; a cell holding one would make the split ambiguous.
        keys = pc.binary_join_element_wise(*arrays, "\x00")
        if pc.min(pc.count_substring(keys, "\x00")).as_py() != len(arrays) - 1:
            raise FallBack("NUL in a cell")
    encoded = pc.dictionary_encode(keys)
    if len(arrays) == 1 and _holds_nul(encoded.dictionary):
        raise FallBack("NUL in a cell")  # the per-row path names its row and column
    distinct = encoded.dictionary.to_pylist()
    try:
        if len(arrays) == 1:
            results = [convert(cell) for cell in distinct]
        else:
            results = [convert(*key.split("\x00")) for key in distinct]
    except BadValue as exc:
        raise FallBack(str(exc)) from None
    return results, encoded.indices


def _holds_nul(values: Any) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_string(values.type):
        return False
    return bool(pc.any(pc.match_substring(values, "\x00")).as_py())


def map_unique(arrays: Sequence[Any], convert: Any, arrow_type: Any) -> Any:
    """The column of convert(*cells) results, computed once per distinct cell combination."""
    import pyarrow as pa

    results, indices = unique_results(arrays, convert)
    return pa.array(results, type=arrow_type).take(indices)


def decimal_column(array: Any, convert: Any, arrow_type: Any) -> Any:
    """A money / quantity column: exact cast for plain decimal text, convert() otherwise."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pc.all(pc.match_substring_regex(array, _PLAIN_DECIMAL_RE)).as_py() is not False:
        nulls = pc.match_substring_regex(array, _NULL_TEXT_RE)
        try:
            # A cast that would round (more than 12 places) or overflow fails: convert() then
            # rounds half-even or reports the value, as the per-row path does.
            return pc.cast(pc.if_else(nulls, None, array), arrow_type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    return map_unique([array], convert, arrow_type)


def required_filled(column: Any) -> None:
    """FallBack when a required column has a null or empty value (the per-row path names it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.null_count:
        raise FallBack("required value missing")
    if pa.types.is_string(column.type) and pc.any(pc.equal(column, "")).as_py():
        raise FallBack("required value missing")


def within_length(column: Any, limit: int) -> None:
    import pyarrow.compute as pc

    longest = pc.max(pc.utf8_length(column)).as_py()
    if longest is not None and longest > limit:
        raise FallBack("value too long")


class LineItemTable(Sequence[LineItemRow]):
    """A chunk of line items held as columns (a pyarrow Table keyed by CostLineItem field
    names, JSON as text). The service loads it with one COPY; anyone else reads it as the
    list of field dicts the per-row path would have built (materialised on first access)."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self._rows: list[LineItemRow] | None = None

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __getitem__(self, index: Any) -> Any:
        return self.rows()[index]

    def rows(self) -> list[LineItemRow]:
        if self._rows is None:
            import pyarrow as pa

            rows = self.table.to_pylist()
            for name in self.table.column_names:
                column_type = self.table.schema.field(name).type
                if pa.types.is_timestamp(column_type):
                    for row in rows:
                        if row[name] is not None:
                            row[name] = row[name].replace(tzinfo=UTC)
                elif _is_json(name):
                    for row in rows:
                        if row[name] is not None:
                            row[name] = json.loads(row[name])
            self._rows = cast(list[LineItemRow], rows)
        return self._rows


def arrow_csv_batches(
    path: Path, header: Sequence[str], *, compressed: bool, file_label: str | None = None
) -> Iterator[Any]:
    """Record batches of a CSV (plain or gzip), every column as text, cells as the csv module
    reads them. FallBack when pyarrow reads the header differently or cannot read on."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    try:
        # A gzip is decompressed by Python's zlib, bounded (bounds.py) as the per-row path's
        # is; the ImportFormatError passes through pyarrow unchanged.
        stream: Any = (
            gzip_budget(path, file_label=file_label or path.name)
            if compressed
            else pa.input_stream(str(path))
        )
        reader = pa_csv.open_csv(
            stream,
            read_options=pa_csv.ReadOptions(block_size=ARROW_BLOCK_BYTES, use_threads=False),
            # newlines_in_values=False is 3x faster; a quoted newline still parses, and one that
            # straddles a block boundary is detected ("parser got out of sync with chunker"),
            # which falls back to the per-row path.
            parse_options=pa_csv.ParseOptions(newlines_in_values=False, ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(
                column_types={name: pa.string() for name in header},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        if reader.schema.names != list(header) or not all(
            pa.types.is_string(field.type) for field in reader.schema
        ):
            raise FallBack("pyarrow reads the header differently")
        yield from reader
    except (pa.ArrowException, OSError, EOFError, ValueError) as exc:
        raise FallBack(str(exc)) from None


def arrow_chunks(batches: Iterator[Any], chunk_size: int) -> Iterator[list[Any]]:
    """The batches' columns regrouped into chunks of exactly chunk_size rows (the last one
    shorter), so chunk boundaries match the per-row path's; each chunk is a list of arrays
    indexed by header position."""
    import pyarrow as pa

    pending: list[Any] = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += batch.num_rows
        while held >= chunk_size:
            table = pa.Table.from_batches(pending)
            head, rest = table.slice(0, chunk_size), table.slice(chunk_size)
            yield [column.combine_chunks() for column in head.columns]
            pending = rest.to_batches()
            held = rest.num_rows
    if held:
        table = pa.Table.from_batches(pending)
        yield [column.combine_chunks() for column in table.columns]


def arrow_csv_tables(
    path: Path,
    header: Sequence[str],
    build: Callable[[list[Any]], Sequence[LineItemRow]],
    *,
    compressed: bool,
    chunk_size: int,
    file_label: str | None = None,
) -> Generator[list[LineItemRow], None, tuple[int, bool]]:
    """The columnar fast path of a CSV parser: its chunks, each built by `build` from the
    columns. Returns (rows delivered, finished): finished is False where it fell back, and the
    parser's per-row path then carries on after the rows already delivered."""
    delivered = 0
    try:
        batches = arrow_csv_batches(path, header, compressed=compressed, file_label=file_label)
        for columns in arrow_chunks(batches, chunk_size):
            table = build(columns)
            delivered += len(table)
            # A Sequence of the same dicts (see LineItemTable); the service COPYs it whole.
            yield cast(list[LineItemRow], table)
    except FallBack:
        return delivered, False
    return delivered, True
