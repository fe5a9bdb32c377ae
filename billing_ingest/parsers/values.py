"""Cell converters and file readers every billing parser shares.

One definition of "a number", "a timestamp", "a currency", "null" and "a CSV row" for all formats,
so a value reads the same whether it comes from a FOCUS, AWS CUR, Azure or GCP file, and a fix
(a new null spelling, a timestamp quirk) reaches every parser at once.

Converters take a raw cell (CSV text or a Parquet / JSON value) and return the CostLineItem-ready
value or raise BadValue; the parser turns that into an ImportFormatError naming file, row and
column, because only the parser knows them. The pyarrow readers (Parquet, the columnar CSV
fast path) are in columnar.py.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, TypeVar

from django.db import models

from billing_ingest.models import CostLineItem
from billing_ingest.parsers.bounds import json_depth_exceeds, max_json_depth, open_gzip
from billing_ingest.parsers.checks import check_cells
from billing_ingest.parsers.currencies import ISO_4217_CODES
from billing_ingest.parsers.lines import CappedText
from finops.core.errors import ImportFormatError
from finops.core.money import EXACT, MONEY_DIGITS, MONEY_PLACES, MONEY_QUANTUM

# A row a parser builds: a LineItemRow, or a job record's fields.
RowT = TypeVar("RowT")

# Rows per chunk: one bulk insert each; bounds memory whatever the file size.
CHUNK_ROWS = 50_000

# Files are recognised by content, because exports arrive renamed or without a suffix.
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
ZIP_MAGIC = b"PK\x03\x04"

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
    # EXACT's digits: quantizing any in-range value never raises.
    return number.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN, context=EXACT)


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
    if json_depth_exceeds(text, max_json_depth()):
        raise BadValue(f"JSON nests deeper than {max_json_depth()} levels (FINOPS_MAX_JSON_DEPTH)")
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
        # Closed by the CappedText, which callers use as a context manager. What comes out of
        # the gzip is bounded (bounds.DecompressedBudget): a bomb fails within seconds.
        binary = open_gzip(path, file_label=label)
        handle = io.TextIOWrapper(
            binary, encoding="utf-8-sig", errors="surrogateescape", newline=""
        )
    else:
        handle = path.open("r", encoding="utf-8-sig", errors="surrogateescape", newline="")
    return CappedText(handle, file_label=label)


# What reading a CSV's first row can raise, each the file's fault: a truncated or corrupt gzip,
# bytes that are not UTF-8, a malformed row.
HEADER_READ_ERRORS: tuple[type[Exception], ...] = (
    EOFError,
    zlib.error,
    gzip.BadGzipFile,
    UnicodeDecodeError,
    csv.Error,
)


def csv_header(
    reader: Iterator[list[str]],
    *,
    file_label: str,
    errors: tuple[type[Exception], ...] = HEADER_READ_ERRORS,
) -> list[str]:
    """The header row (row 1) of a CSV reader, its cells checked (check_cells): an empty file,
    an unreadable first row or a bad byte in a column name fails as an ImportFormatError naming
    the file (and row 1, and the column). ``errors``: what else counts as unreadable (a zip
    member's OSError, say)."""
    try:
        header = next(reader)
    except StopIteration:
        raise ImportFormatError("file is empty (no header row)", file=file_label) from None
    except errors as exc:
        raise ImportFormatError(
            f"cannot read the header row ({exc})", file=file_label, row=1
        ) from None
    check_cells(header, file_label=file_label, row=1)
    return header


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


def skip_rows(rows: Iterator[tuple[int, list[str]]], count: int) -> Iterator[tuple[int, list[str]]]:
    """rows without its first count rows (the ones the fast path already delivered)."""
    for _ in range(count):
        if next(rows, None) is None:
            return iter(())
    return rows


def built_chunks(
    rows: Iterable[tuple[int, Any]],
    build: Callable[[Any, int], RowT],
    *,
    chunk_size: int,
    empty_error: ImportFormatError | None = None,
) -> Iterator[list[RowT]]:
    """Build (row number, cells) pairs into line-item dicts, in lists of chunk_size, so that a
    file of any size streams. A file without data rows raises empty_error when one is given."""
    chunk: list[RowT] = []
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
