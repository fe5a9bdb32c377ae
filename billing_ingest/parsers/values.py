"""Cell converters and file readers every billing parser shares.

One definition of "a number", "a timestamp", "a currency", "null" and "a CSV row" for all formats,
so a value reads the same whether it comes from a FOCUS, AWS CUR, Azure or GCP file, and a fix
(a new null spelling, a timestamp quirk) reaches every parser at once.

Converters take a raw cell (CSV text or a Parquet / JSON value) and return the CostLineItem-ready
value or raise BadValue; the parser turns that into an ImportFormatError naming file, row and
column, because only the parser knows them.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from django.db import models

from billing_ingest.currencies import ISO_4217_CODES
from billing_ingest.errors import ImportFormatError
from billing_ingest.models import MONEY_DIGITS, MONEY_PLACES, MONEY_QUANTUM, CostLineItem
from billing_ingest.parsers.checks import check_cells
from billing_ingest.parsers.lines import CappedText

# Rows per chunk: one bulk insert each; bounds memory whatever the file size.
CHUNK_ROWS = 50_000

# Files are recognised by content, because exports arrive renamed or without a suffix.
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
ZIP_MAGIC = b"PK\x03\x04"
# A row dict may carry, under this key, a note for the import summary about how the row was read
# (e.g. a value inferred because the export left it empty). The loader pops it before storing
# the row and counts each note's rows on the batch (ImportBatch.notes).
ROW_NOTE = "_import_note"

_CURRENCY_RE = re.compile(r"^[A-Z]{3}$")
# Hour 24 and beyond: the FOCUS 1.2 spec's own examples write 2023-02-01T30:00:00Z for "ten hours
# after 20:00". We read such an hour as rolling over into the next day rather than reject the
# spec's golden files.
_OVERFLOW_HOUR_RE = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<hour>\d{2})(?P<rest>:\d{2}(?::\d{2}(?:\.\d+)?)?)"
    r"(?P<tz>Z|[+-]\d{2}:?\d{2})?$"
)
# Largest magnitudes the columns hold (money_field; consumed_quantity is 38 digits, 12 places).
_MAX_MONEY = Decimal(10) ** (MONEY_DIGITS - MONEY_PLACES)
_MAX_QUANTITY = Decimal(10) ** (38 - MONEY_PLACES)
# Enough precision that quantizing any in-range value never raises.
_QUANTIZE_CONTEXT = Context(prec=60)


class BadValue(Exception):
    """A cell that cannot be converted; the parser adds file, row and column."""


# --------------------------------------------------------------------------- value converters


def is_null(value: object) -> bool:
    """None, blank, or the literal ``NULL`` that FOCUS sample data and some exports write."""
    if value is None:
        return True
    if isinstance(value, str):
        text = value.strip()
        return text == "" or text.upper() == "NULL"
    return False


def _decimal(value: object, *, limit: Decimal) -> Decimal | None:
    if is_null(value):
        return None
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, bool):
        raise BadValue(f"{value!r} is not a number")
    elif isinstance(value, int | float | str):
        # Parquet floats go through str so that 0.1 stays 0.1, not its binary expansion.
        text = value.strip() if isinstance(value, str) else str(value)
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise BadValue(f"{text!r} is not a number") from None
    else:
        raise BadValue(f"{value!r} is not a number")
    if not number.is_finite():
        raise BadValue(f"{_shown(value)} is not a finite number")
    if abs(number) >= limit:
        raise BadValue(f"{_shown(value)} is out of range")
    return number.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN, context=_QUANTIZE_CONTEXT)


def _shown(value: object) -> str:
    # '1e400' for text, 1E+400 for a JSON number read as Decimal (not "Decimal('1E+400')").
    return repr(value) if isinstance(value, str) else str(value)


def parse_money(value: object) -> Decimal | None:
    """A money cell as Decimal quantized to MONEY_QUANTUM (half-even); null is None.

    Out-of-range values are rejected here rather than by the database, where the error would no
    longer name the row."""
    return _decimal(value, limit=_MAX_MONEY)


def parse_quantity(value: object) -> Decimal | None:
    """A consumed-quantity cell (same precision as money, wider range); null is None."""
    return _decimal(value, limit=_MAX_QUANTITY)


@lru_cache(maxsize=8192)
def _parse_timestamp_text(text: str) -> datetime:
    # Billing files repeat the same few hundred timestamps millions of times: cache them.
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = _parse_overflow_hour(text)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _parse_overflow_hour(text: str) -> datetime:
    match = _OVERFLOW_HOUR_RE.match(text)
    if match is None or int(match["hour"]) < 24:
        raise BadValue(f"{text!r} is not a timestamp")
    hours = int(match["hour"])
    base = f"{match['date']}T00{match['rest']}{match['tz'] or ''}"
    try:
        return datetime.fromisoformat(base) + timedelta(hours=hours)
    except ValueError:
        raise BadValue(f"{text!r} is not a timestamp") from None


def parse_timestamp(value: object) -> datetime | None:
    """An ISO 8601 text, datetime or date cell as a UTC-aware datetime; null is None.

    A timestamp without an offset is UTC: billing exports (FOCUS sample data, CUR) write UTC
    without the ``Z``."""
    if is_null(value):
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        return _parse_timestamp_text(value.strip())
    raise BadValue(f"{value!r} is not a timestamp")


def cell_text(value: object) -> str:
    """A text cell stripped; null (including the literal ``NULL``) is the empty string."""
    if is_null(value):
        return ""
    return str(value).strip()


def parse_currency(value: object) -> str:
    """A 3-letter ISO 4217 code, upper-cased; anything else is a BadValue."""
    text = cell_text(value).upper()
    if not _CURRENCY_RE.match(text):
        raise BadValue(f"{cell_text(value)!r} is not a 3-letter ISO 4217 currency code")
    if text not in ISO_4217_CODES:
        raise BadValue(f"{cell_text(value)!r} is not an ISO 4217 currency code")
    return text


def parse_json_object(value: object) -> dict[str, Any]:
    """A JSON object from text, a Parquet map (list of pairs) or struct (dict); null is {}."""
    if is_null(value):
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return dict(value)
    if not isinstance(value, str):
        raise BadValue(f"{value!r} is not a JSON object")
    text = value.strip()
    # Azure writes Tags as JSON without the outer braces.
    if not text.startswith("{"):
        text = "{" + text + "}"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadValue(f"{value!r} is not valid JSON ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise BadValue(f"{value!r} is not a JSON object")
    return parsed


def column_max_length(field_name: str) -> int:
    """CostLineItem's max_length for a text field: parsers check it so that an overlong value
    fails with its row and column instead of as a database error for the whole chunk."""
    field = CostLineItem._meta.get_field(field_name)
    assert isinstance(field, models.CharField) and field.max_length is not None
    return field.max_length


# --------------------------------------------------------------------------- readers


def read_magic(path: Path) -> bytes:
    """The first four bytes: gzip, zip and Parquet are told apart by content, not by name."""
    with path.open("rb") as handle:
        return handle.read(4)


def open_text(path: Path, *, compressed: bool, file_label: str | None = None) -> CappedText:
    """A CSV file (gzip or plain) opened for the csv module, its lines capped at
    FINOPS_MAX_LINE_BYTES (an overlong line fails naming `file_label` and its line)."""
    label = file_label if file_label is not None else path.name
    # utf-8-sig drops a byte order mark (Azure and Excel write one) and is plain UTF-8 otherwise.
    # A byte that is not UTF-8 becomes a surrogate in its cell, which csv_rows reports with its
    # row and column (the decoder itself reads ahead and cannot say which row it was on).
    handle: IO[str]
    if compressed:
        # Closed by the CappedText, which callers use as a context manager.
        handle = gzip.open(  # noqa: SIM115
            path, "rt", encoding="utf-8-sig", errors="surrogateescape", newline=""
        )
    else:
        handle = path.open("r", encoding="utf-8-sig", errors="surrogateescape", newline="")
    return CappedText(handle, file_label=label)


def csv_rows(
    reader: Iterator[list[str]], *, file_label: str, header: Sequence[str] | None = None
) -> Iterator[tuple[int, list[str]]]:
    """Data rows numbered as a spreadsheet shows them (header = row 1); blank lines skipped.

    Decoding, gzip and CSV errors surface only while iterating, so they are turned here into an
    ImportFormatError that names the row reached; a cell holding a NUL or a byte that is not
    UTF-8 into one naming its row and column (by header name)."""
    row_number = 1
    while True:
        row_number += 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ImportFormatError(
                f"gzip data is truncated or corrupt ({exc}); rows before row {row_number} "
                "were read",
                file=file_label,
                row=row_number,
            ) from None
        except UnicodeDecodeError as exc:
            raise ImportFormatError(
                f"is not valid UTF-8 ({exc.reason})", file=file_label, row=row_number
            ) from None
        except csv.Error as exc:
            raise ImportFormatError(
                f"is not valid CSV ({exc})", file=file_label, row=row_number
            ) from None
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue
        check_cells(cells, file_label=file_label, row=row_number, header=header)
        yield row_number, cells


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


class LineItemTable(Sequence[dict[str, Any]]):
    """A chunk of line items held as columns (a pyarrow Table keyed by CostLineItem field
    names, JSON as text). The service loads it with one COPY; anyone else reads it as the
    list of field dicts the per-row path would have built (materialised on first access)."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self._rows: list[dict[str, Any]] | None = None

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def __getitem__(self, index: Any) -> Any:
        return self.rows()[index]

    def rows(self) -> list[dict[str, Any]]:
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
            self._rows = rows
        return self._rows


def arrow_csv_batches(path: Path, header: Sequence[str], *, compressed: bool) -> Iterator[Any]:
    """Record batches of a CSV (plain or gzip), every column as text, cells as the csv module
    reads them. FallBack when pyarrow reads the header differently or cannot read on."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    try:
        stream = pa.input_stream(str(path), compression="gzip" if compressed else None)
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


def skip_rows(rows: Iterator[tuple[int, list[str]]], count: int) -> Iterator[tuple[int, list[str]]]:
    """rows without its first count rows (the ones the fast path already delivered)."""
    for _ in range(count):
        if next(rows, None) is None:
            return iter(())
    return rows


def built_chunks(
    rows: Iterable[tuple[int, Any]],
    build: Callable[[Any, int], dict[str, Any]],
    *,
    chunk_size: int,
    empty_error: ImportFormatError | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Build (row number, cells) pairs into line-item dicts, in lists of chunk_size, so that a
    file of any size streams. A file without data rows raises empty_error when one is given."""
    chunk: list[dict[str, Any]] = []
    seen = False
    for row_number, cells in rows:
        chunk.append(build(cells, row_number))
        seen = True
        if len(chunk) >= chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
    if not seen and empty_error is not None:
        raise empty_error
