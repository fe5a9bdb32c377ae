"""FOCUS 1.2 export of one billing month's line items, as Parquet or CSV.

The month's CostLineItems are streamed from the database (selectors.line_items_for_month) into
Arrow record batches of EXPORT_CHUNK_ROWS rows and appended to the file, so memory stays bounded
whatever the size of the month. The file is written beside its destination and renamed into
place, so a failed export never leaves half a file under the requested name.

CSV holds the same values as Parquet, as text: plain decimal strings (never exponents or floats)
and ISO 8601 UTC timestamps ending in Z.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from finops.core.csv_safety import csv_safe
from finops.energy.line_energy import MonthLineEnergy
from finops.exports.columns import CSV_SCHEMA, PARQUET_SCHEMA
from finops.exports.mapping import focus_row
from finops.exports.selectors import line_items_for_month, service_categories_for_month

# Rows per Arrow record batch (and per database fetch).
EXPORT_CHUNK_ROWS = 10_000
EXPORT_FORMATS = {".parquet": "parquet", ".csv": "csv"}
_ZERO = Decimal(0)


def focus_export_format(path: Path) -> str:
    """'parquet' or 'csv' from the file name; ValueError for anything else."""
    found = EXPORT_FORMATS.get(path.suffix.lower())
    if found is None:
        raise ValueError(f"{path.name}: the file name must end in .parquet or .csv")
    return found


def _csv_cell(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        # Plain notation; keep a decimal point so a column of whole numbers still reads as
        # decimal, not integer, in CSV type inference (focus-validator rejects BIGINT there).
        text = format(value.normalize(), "f")
        return text if "." in text else f"{text}.0"
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%dT%H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}"
        return text + "Z"
    # Text from bills and tags may hold a spreadsheet formula: written as text (csv_safety).
    return csv_safe(str(value))


class _BatchWriter(Protocol):
    def write_batch(self, batch: pa.RecordBatch) -> None: ...

    def close(self) -> None: ...


def _open_writer(path: Path, file_format: str) -> _BatchWriter:
    if file_format == "parquet":
        return pq.ParquetWriter(str(path), PARQUET_SCHEMA)
    return pa_csv.CSVWriter(str(path), CSV_SCHEMA)


def _record_batch(rows: list[dict[str, Any]], file_format: str) -> pa.RecordBatch:
    if file_format == "parquet":
        return pa.RecordBatch.from_pylist(rows, schema=PARQUET_SCHEMA)
    text_rows = [{name: _csv_cell(value) for name, value in row.items()} for row in rows]
    return pa.RecordBatch.from_pylist(text_rows, schema=CSV_SCHEMA)


@dataclass(frozen=True)
class FocusExport:
    path: Path
    file_format: str
    month: date
    rows: int
    # Per BillingCurrency, exact sums of what was written.
    invoiced: dict[str, Decimal]
    effective: dict[str, Decimal]
    # CSV only: rows whose BillingAccountId or SubAccountId is all digits (every AWS account).
    # They are written quoted, as text, like every string; readers that guess a CSV column's
    # type from its characters read them as integers (docs/focus_validator_defects, G).
    digit_id_rows: int = 0


def _digit_ids(row: dict[str, Any]) -> bool:
    return any(
        isinstance(row[column], str) and row[column].isdigit()
        for column in ("BillingAccountId", "SubAccountId")
    )


def _chunks(items: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def focus_month_export(
    *, month: date, out: Path, chunk_size: int = EXPORT_CHUNK_ROWS
) -> FocusExport:
    """Write the line items of billing month `month` (billing_period == month) to `out` as FOCUS
    1.2, Parquet or CSV by the file's suffix. A month without line items gives a file with the
    header (schema) and no rows. Replaces `out` atomically."""
    file_format = focus_export_format(out)
    month = month.replace(day=1)
    categories = service_categories_for_month(month)
    energy = MonthLineEnergy(month)
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    invoiced: dict[str, Decimal] = {}
    effective: dict[str, Decimal] = {}
    rows = digit_id_rows = 0
    writer = _open_writer(partial, file_format)
    closed = False
    try:
        for items in _chunks(line_items_for_month(month, chunk_size), chunk_size):
            focus_rows = [
                focus_row(item, service_categories=categories) | energy.columns(item)
                for item in items
            ]
            writer.write_batch(_record_batch(focus_rows, file_format))
            for row in focus_rows:
                currency = row["BillingCurrency"]
                invoiced[currency] = invoiced.get(currency, _ZERO) + row["BilledCost"]
                effective[currency] = effective.get(currency, _ZERO) + row["EffectiveCost"]
                digit_id_rows += file_format == "csv" and _digit_ids(row)
            rows += len(focus_rows)
        writer.close()
        closed = True
        os.replace(partial, out)
    except BaseException:
        if not closed:
            writer.close()
        partial.unlink(missing_ok=True)
        raise
    return FocusExport(
        path=out,
        file_format=file_format,
        month=month,
        rows=rows,
        invoiced=invoiced,
        effective=effective,
        digit_id_rows=digit_id_rows,
    )
