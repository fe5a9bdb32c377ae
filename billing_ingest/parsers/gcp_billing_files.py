"""GCP billing export files: the records of a BigQuery export as CSV, JSON lines or Parquet
(told apart by content), each a flat {column: value} dict (nested records flattened to dotted
names, labels kept whole) numbered as its row, with the file's errors named by row (and column).
The rows are mapped in billing_ingest/parsers/gcp_billing.py."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from billing_ingest.parsers.bounds import (
    csv_reader,
    json_loads,
)
from billing_ingest.parsers.checks import (
    check_record_batch,
    check_unique_columns,
    missing_columns_error,
    text_problem,
)
from billing_ingest.parsers.lines import CappedText
from billing_ingest.parsers.values import (
    csv_header,
    csv_rows,
    open_text,
)
from finops.core.errors import ImportFormatError

REQUIRED_COLUMNS = ("cost", "currency", "usage_start_time", "usage_end_time", "invoice.month")
# Label sources, lowest precedence first: resource labels win over project labels.
_LABEL_COLUMNS = ("project.labels", "system_labels", "labels")


def _flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"service": {"description": x}} -> {"service.description": x}; lists stay values."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and name not in _LABEL_COLUMNS:
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _csv_records(handle: CappedText, *, file_label: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv_reader(handle, file_label=file_label)
    header = [name.strip() for name in csv_header(reader, file_label=file_label)]
    missing = [column for column in REQUIRED_COLUMNS if column not in header]
    if missing:
        raise missing_columns_error("BigQuery export", missing, file_label=file_label, row=1)
    try:
        # Every column: cells are zipped into a dict by name, so a repeated name loses one.
        check_unique_columns(header, range(len(header)), file_label=file_label, key=str.strip)
    except ImportFormatError as exc:
        raise exc.with_row(1) from None
    for row_number, cells in csv_rows(reader, file_label=file_label, header=header):
        if len(cells) != len(header):
            raise ImportFormatError(
                f"has {len(cells)} values but the header has {len(header)} columns",
                file=file_label,
                row=row_number,
            )
        yield row_number, dict(zip(header, cells, strict=True))


def _jsonl_records(handle: CappedText, *, file_label: str) -> Iterator[tuple[int, dict[str, Any]]]:
    line_number = 0
    while True:
        line_number += 1
        try:
            line = handle.readline()
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ImportFormatError(
                f"gzip data is truncated or corrupt ({exc})", file=file_label, row=line_number
            ) from None
        except UnicodeDecodeError as exc:
            raise ImportFormatError(
                f"is not valid UTF-8 ({exc.reason})", file=file_label, row=line_number
            ) from None
        if not line:
            return
        if not line.strip():
            continue
        try:
            record = json_loads(line, file_label=file_label, parse_float=Decimal)
        except ImportFormatError as exc:  # nested too deep
            raise exc.with_row(line_number) from None
        except json.JSONDecodeError as exc:
            raise ImportFormatError(
                f"is not valid JSON ({exc.msg})", file=file_label, row=line_number
            ) from None
        if not isinstance(record, dict):
            raise ImportFormatError("is not a JSON object", file=file_label, row=line_number)
        flat = _flatten(record)
        if "\\u0000" in line or text_problem([line]) is not None:
            _check_strings(flat, file_label=file_label, row=line_number)
        yield line_number, flat


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _check_strings(record: dict[str, Any], *, file_label: str, row: int) -> None:
    """The column of a JSON value holding a NUL (written \\u0000) or a byte that is not UTF-8."""
    for column, value in record.items():
        problem = text_problem([column, *_strings(value)])
        if problem is not None:
            raise ImportFormatError(problem[1], file=file_label, row=row, column=column)


def _parquet_records(
    path: Path, *, file_label: str, chunk_size: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise ImportFormatError(f"cannot read Parquet ({exc})", file=file_label) from None
    names = _schema_names(list(parquet.schema_arrow))
    missing = [column for column in REQUIRED_COLUMNS if column not in names]
    if missing:
        raise missing_columns_error("BigQuery export", missing, file_label=file_label)
    number = 1
    try:
        for batch in parquet.iter_batches(batch_size=chunk_size):
            check_record_batch(batch, first_row=number, file_label=file_label)
            for record in batch.to_pylist():
                yield number, _flatten(record)
                number += 1
    except (pa.ArrowException, OSError) as exc:
        raise ImportFormatError(
            f"cannot read Parquet ({exc})", file=file_label, row=number
        ) from None


def _schema_names(fields: list[Any], prefix: str = "") -> set[str]:
    """Parquet column names as the dotted names records flatten to (service.description)."""
    import pyarrow as pa

    names: set[str] = set()
    for field in fields:
        name = f"{prefix}{field.name}"
        names.add(name)
        if pa.types.is_struct(field.type):
            nested = [field.type.field(i) for i in range(field.type.num_fields)]
            names |= _schema_names(nested, f"{name}.")
    return names


def _first_character(handle: CappedText) -> str:
    """The first non-blank character, read without consuming the stream (it is re-opened)."""
    try:
        for line in handle:
            stripped = line.strip()
            if stripped:
                return stripped[0]
    except (EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError):
        return ""
    return ""


def _text_records(
    path: Path, *, file_label: str, compressed: bool
) -> Iterator[tuple[int, dict[str, Any]]]:
    with open_text(path, compressed=compressed, file_label=file_label) as handle:
        is_jsonl = _first_character(handle) == "{"
    with open_text(path, compressed=compressed, file_label=file_label) as handle:
        if is_jsonl:
            yield from _jsonl_records(handle, file_label=file_label)
        else:
            yield from _csv_records(handle, file_label=file_label)
