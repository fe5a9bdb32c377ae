"""FOCUS 1.0-1.2 cost and usage files: CSV (plain or gzip) and Parquet, read in chunks.

Every row becomes a dict of CostLineItem field names (without batch and source, which the service
adds): Decimal money quantized to MONEY_PLACES, UTC-aware datetimes, Tags as a dict. A value that
cannot be read raises ImportFormatError naming the file, the row and the FOCUS column.

Memory stays bounded by the chunk size whatever the file size: CSV is read row by row through
the csv module, Parquet one record batch at a time.
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

from django.conf import settings
from django.db import models

from billing_ingest.errors import ImportFormatError
from billing_ingest.models import MONEY_DIGITS, MONEY_PLACES, MONEY_QUANTUM, CostLineItem
from billing_ingest.parsers import LineItemChunks, register_billing_parser

CHUNK_ROWS = 50_000

REQUIRED_COLUMNS = (
    "BillingPeriodStart",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "BilledCost",
    "EffectiveCost",
)

_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
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


class _BadValue(Exception):
    """A cell that cannot be converted; the row builder adds file, row and column."""


# --------------------------------------------------------------------------- value converters


def _is_null(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        text = value.strip()
        return text == "" or text.upper() == "NULL"
    return False


def _decimal(value: object, *, limit: Decimal) -> Decimal | None:
    if _is_null(value):
        return None
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, bool):
        raise _BadValue(f"{value!r} is not a number")
    elif isinstance(value, int | float | str):
        # Parquet floats go through str so that 0.1 stays 0.1, not its binary expansion.
        text = value.strip() if isinstance(value, str) else str(value)
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise _BadValue(f"{text!r} is not a number") from None
    else:
        raise _BadValue(f"{value!r} is not a number")
    if not number.is_finite():
        raise _BadValue(f"{value!r} is not a finite number")
    if abs(number) >= limit:
        raise _BadValue(f"{value!r} is out of range")
    return number.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN, context=_QUANTIZE_CONTEXT)


def _money(value: object) -> Decimal | None:
    return _decimal(value, limit=_MAX_MONEY)


def _quantity(value: object) -> Decimal | None:
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
        raise _BadValue(f"{text!r} is not a timestamp")
    hours = int(match["hour"])
    base = f"{match['date']}T00{match['rest']}{match['tz'] or ''}"
    try:
        return datetime.fromisoformat(base) + timedelta(hours=hours)
    except ValueError:
        raise _BadValue(f"{text!r} is not a timestamp") from None


def _timestamp(value: object) -> datetime | None:
    if _is_null(value):
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        return _parse_timestamp_text(value.strip())
    raise _BadValue(f"{value!r} is not a timestamp")


def _text(value: object) -> str:
    if _is_null(value):
        return ""
    return str(value).strip()


def _currency(value: object) -> str:
    text = _text(value).upper()
    if not _CURRENCY_RE.match(text):
        raise _BadValue(f"{_text(value)!r} is not a 3-letter ISO 4217 currency code")
    return text


def _json_object(value: object) -> dict[str, Any]:
    """A JSON object from text, a Parquet map (list of pairs) or struct (dict); null is {}."""
    if _is_null(value):
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return dict(value)
    if not isinstance(value, str):
        raise _BadValue(f"{value!r} is not a JSON object")
    text = value.strip()
    # Azure writes Tags as JSON without the outer braces.
    if not text.startswith("{"):
        text = "{" + text + "}"
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadValue(f"{value!r} is not valid JSON ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise _BadValue(f"{value!r} is not a JSON object")
    return parsed


def _instance_type_from_details(value: object) -> str:
    """InstanceType from SkuPriceDetails / x_SkuDetails; anything unreadable means "unknown",
    because attribution reads the SKU itself when this is blank."""
    try:
        details = _json_object(value)
    except _BadValue:
        return ""
    found = details.get("InstanceType") or details.get("x_InstanceType") or ""
    return str(found).strip() if found else ""


# --------------------------------------------------------------------------- column plan

Converter = Callable[[object], object]

# (CostLineItem field, FOCUS columns in order of preference, converter)
_STRING_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("provider_name", ("ProviderName", "ServiceProviderName")),
    ("billing_account_id", ("BillingAccountId",)),
    ("sub_account_id", ("SubAccountId",)),
    ("charge_category", ("ChargeCategory",)),
    ("pricing_category", ("PricingCategory",)),
    ("service_category", ("ServiceCategory",)),
    ("service_name", ("ServiceName",)),
    ("sku_id", ("SkuId",)),
    ("region_id", ("RegionId",)),
    ("resource_id", ("ResourceId",)),
    ("resource_name", ("ResourceName",)),
    ("resource_type", ("ResourceType",)),
    ("commitment_discount_id", ("CommitmentDiscountId",)),
    ("commitment_discount_status", ("CommitmentDiscountStatus",)),
    ("commitment_discount_type", ("CommitmentDiscountType",)),
    ("consumed_unit", ("ConsumedUnit",)),
)
_TIMESTAMP_COLUMNS = (
    ("billing_period_start", "BillingPeriodStart", True),
    ("billing_period_end", "BillingPeriodEnd", False),
    ("charge_period_start", "ChargePeriodStart", True),
    ("charge_period_end", "ChargePeriodEnd", True),
)
_MONEY_COLUMNS = (
    ("list_cost", "ListCost", False),
    ("contracted_cost", "ContractedCost", False),
    ("billed_cost", "BilledCost", True),
    ("effective_cost", "EffectiveCost", True),
)


def _max_length(field_name: str) -> int:
    field = CostLineItem._meta.get_field(field_name)
    assert isinstance(field, models.CharField) and field.max_length is not None
    return field.max_length


class _RowBuilder:
    """Turns one row of raw cells (CSV text or Parquet values) into CostLineItem fields.

    The plan (which cell feeds which field, through which converter) is worked out once from
    the header, so the per-row work is a flat loop.
    """

    def __init__(self, header: Sequence[str], *, file_label: str) -> None:
        self.file_label = file_label
        self.width = len(header)
        positions: dict[str, int] = {}
        for index, name in enumerate(header):
            # FOCUS names are unique ignoring case; some exports vary the case (SkuPriceid).
            positions.setdefault(name.strip().lower(), index)
        missing = [name for name in REQUIRED_COLUMNS if name.lower() not in positions]
        if missing:
            raise ImportFormatError(
                f"missing required FOCUS column(s): {', '.join(missing)}",
                file=file_label,
                column=missing[0],
            )

        def find(*names: str) -> tuple[str, int] | None:
            for name in names:
                if name.lower() in positions:
                    return name, positions[name.lower()]
            return None

        # (field, column name, position, converter, required)
        self.plan: list[tuple[str, str, int, Converter, bool]] = []
        for field, names in _STRING_COLUMNS:
            hit = find(*names)
            if hit is not None:
                self.plan.append((field, hit[0], hit[1], self._string(field), False))
        for field, name, required in _TIMESTAMP_COLUMNS:
            hit = find(name)
            if hit is not None:
                self.plan.append((field, name, hit[1], _timestamp, required))
        for field, name, required in _MONEY_COLUMNS:
            hit = find(name)
            if hit is not None:
                self.plan.append((field, name, hit[1], _money, required))
        for field, name, converter in (
            ("consumed_quantity", "ConsumedQuantity", _quantity),
            ("tags", "Tags", _json_object),
        ):
            hit = find(name)
            if hit is not None:
                self.plan.append((field, name, hit[1], converter, False))

        currency = find("BillingCurrency")
        if currency is not None:
            self.plan.append(("billing_currency", "BillingCurrency", currency[1], _currency, True))
        self.default_currency: str = settings.FINOPS_DEFAULT_CURRENCY

        self.instance_type_direct = find("x_InstanceType")
        self.instance_type_details = [
            hit for hit in (find("SkuPriceDetails"), find("x_SkuDetails")) if hit is not None
        ]
        self.defaults: dict[str, Any] = {
            field: "" for field, names in _STRING_COLUMNS if find(*names) is None
        }
        self.defaults.update(
            {
                "billing_period_end": None,
                "list_cost": None,
                "contracted_cost": None,
                "consumed_quantity": None,
                "tags": {},
                "billing_currency": self.default_currency,
                "x_instance_type": "",
                "x_gpu_count": None,
                "x_gpu_model": "",
            }
        )

    @staticmethod
    def _string(field: str) -> Converter:
        limit = _max_length(field)

        def convert(value: object) -> str:
            text = _text(value)
            if len(text) > limit:
                raise _BadValue(f"value is longer than {limit} characters")
            return text

        return convert

    def build(self, cells: Sequence[object], row_number: int) -> dict[str, Any]:
        if len(cells) != self.width:
            raise ImportFormatError(
                f"has {len(cells)} values but the header has {self.width} columns",
                file=self.file_label,
                row=row_number,
            )
        item = dict(self.defaults)
        for field, column, position, convert, required in self.plan:
            raw = cells[position]
            try:
                value = convert(raw)
            except _BadValue as exc:
                raise ImportFormatError(
                    str(exc), file=self.file_label, row=row_number, column=column
                ) from None
            if required and (value is None or value == ""):
                raise ImportFormatError(
                    "is empty but FOCUS requires a value",
                    file=self.file_label,
                    row=row_number,
                    column=column,
                )
            item[field] = value
        item["x_instance_type"] = self._instance_type(cells, row_number)
        start: datetime = item["billing_period_start"]
        item["billing_period"] = date(start.year, start.month, 1)
        return item

    def _instance_type(self, cells: Sequence[object], row_number: int) -> str:
        found = ""
        if self.instance_type_direct is not None:
            found = _text(cells[self.instance_type_direct[1]])
        for _, position in self.instance_type_details:
            if found:
                break
            found = _instance_type_from_details(cells[position])
        limit = _max_length("x_instance_type")
        if len(found) > limit:
            raise ImportFormatError(
                f"instance type is longer than {limit} characters",
                file=self.file_label,
                row=row_number,
                column="x_InstanceType",
            )
        return found


# --------------------------------------------------------------------------- readers


def _magic(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(4)


def _chunked(
    rows: Iterable[tuple[int, Sequence[object]]], builder: _RowBuilder, chunk_size: int
) -> LineItemChunks:
    chunk: list[dict[str, Any]] = []
    for row_number, cells in rows:
        chunk.append(builder.build(cells, row_number))
        if len(chunk) >= chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _open_text(path: Path, *, compressed: bool) -> IO[str]:
    # utf-8-sig drops a byte order mark (Azure and Excel write one) and is plain UTF-8 otherwise.
    if compressed:
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return path.open("r", encoding="utf-8-sig", newline="")


def _csv_rows(reader: Iterator[list[str]], *, file_label: str) -> Iterator[tuple[int, list[str]]]:
    """Data rows numbered as a spreadsheet shows them (header = row 1); blank lines skipped."""
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
        yield row_number, cells


def _parse_csv(path: Path, *, file_label: str, compressed: bool, chunk_size: int) -> LineItemChunks:
    with _open_text(path, compressed=compressed) as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise ImportFormatError("file is empty (no header row)", file=file_label) from None
        except (EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError, csv.Error) as exc:
            raise ImportFormatError(
                f"cannot read the header row ({exc})", file=file_label, row=1
            ) from None
        builder = _RowBuilder(header, file_label=file_label)
        rows = _csv_rows(reader, file_label=file_label)
        seen = False
        for chunk in _chunked(rows, builder, chunk_size):
            seen = True
            yield chunk
        if not seen:
            raise ImportFormatError("file has a header but no data rows", file=file_label)


def _parse_parquet(path: Path, *, file_label: str, chunk_size: int) -> LineItemChunks:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise ImportFormatError(f"cannot read Parquet ({exc})", file=file_label) from None
    header = list(parquet.schema_arrow.names)
    builder = _RowBuilder(header, file_label=file_label)
    wanted = sorted({entry[2] for entry in builder.plan} | _extra_positions(builder))
    first_row = 1
    seen = False
    try:
        batches = parquet.iter_batches(batch_size=chunk_size, columns=[header[i] for i in wanted])
        for record_batch in batches:
            columns = {pos: record_batch.column(k).to_pylist() for k, pos in enumerate(wanted)}
            rows = (
                (first_row + i, _ParquetRow(columns, i, len(header)))
                for i in range(record_batch.num_rows)
            )
            chunk = [builder.build(cells, number) for number, cells in rows]
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


def _extra_positions(builder: _RowBuilder) -> set[int]:
    extra = {position for _, position in builder.instance_type_details}
    if builder.instance_type_direct is not None:
        extra.add(builder.instance_type_direct[1])
    return extra


class _ParquetRow(Sequence[object]):
    """A row view over column lists: only the columns the plan reads are materialised."""

    def __init__(self, columns: dict[int, list[object]], index: int, width: int) -> None:
        self._columns = columns
        self._index = index
        self._width = width

    def __len__(self) -> int:
        return self._width

    def __getitem__(self, position: int) -> object:  # type: ignore[override]
        column = self._columns.get(position)
        return None if column is None else column[self._index]


@register_billing_parser("focus")
def parse_focus(path: Path, *, file_label: str, chunk_size: int | None = None) -> LineItemChunks:
    """Chunks of at most chunk_size (default CHUNK_ROWS) CostLineItem field dicts from a FOCUS
    CSV, gzip CSV (by magic bytes or .gz) or Parquet file."""
    chunk_size = chunk_size or CHUNK_ROWS
    magic = _magic(path)
    if magic == _PARQUET_MAGIC or path.suffix.lower() == ".parquet":
        return _parse_parquet(path, file_label=file_label, chunk_size=chunk_size)
    compressed = magic[:2] == _GZIP_MAGIC or path.suffix.lower() == ".gz"
    return _parse_csv(path, file_label=file_label, compressed=compressed, chunk_size=chunk_size)
