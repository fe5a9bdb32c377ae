"""FOCUS 1.0-1.2 cost and usage files: CSV (plain or gzip) and Parquet, read in chunks.

Every row becomes a dict of CostLineItem field names (without batch and source, which the service
adds): Decimal money quantized to MONEY_PLACES, UTC-aware datetimes, Tags as a dict. A value that
cannot be read raises ImportFormatError naming the file, the row and the FOCUS column.

Memory stays bounded by the chunk size whatever the file size: CSV is read row by row through
the csv module, Parquet one record batch at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, cast

from django.conf import settings

from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.bounds import csv_reader
from billing_ingest.parsers.checks import check_unique_columns, missing_columns_error
from billing_ingest.parsers.columnar import (
    FallBack,
    LineItemTable,
    arrow_csv_tables,
    arrow_type,
    constant_column,
    decimal_column,
    map_unique,
    parquet_chunks,
    required_filled,
    within_length,
)
from billing_ingest.parsers.rows import LineItemRow
from billing_ingest.parsers.values import (
    CHUNK_ROWS,
    GZIP_MAGIC,
    PARQUET_MAGIC,
    BadValue,
    cell_text,
    column_max_length,
    csv_header,
    csv_rows,
    open_text,
    parse_currency,
    parse_json_object,
    parse_money,
    parse_quantity,
    parse_timestamp,
    read_magic,
    skip_rows,
)
from finops.core.errors import ImportFormatError

REQUIRED_COLUMNS = (
    "BillingPeriodStart",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "BilledCost",
    "EffectiveCost",
)


# --------------------------------------------------------------------------- FOCUS-only values


def _instance_type_from_details(value: object) -> str:
    """InstanceType from SkuPriceDetails / x_SkuDetails; anything unreadable means "unknown",
    because attribution reads the SKU itself when this is blank."""
    try:
        details = parse_json_object(value)
    except BadValue:
        return ""
    found = details.get("InstanceType") or details.get("x_InstanceType") or ""
    return str(found).strip() if found else ""


# --------------------------------------------------------------------------- column plan

Converter = Callable[[object], object]
# (field, column name, position, converter, required)
PlanStep = tuple[str, str, int, Converter, bool]

# (CostLineItem field, FOCUS columns in order of preference, converter)
_STRING_COLUMNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("provider_name", ("ProviderName", "ServiceProviderName")),
    ("billing_account_id", ("BillingAccountId",)),
    ("sub_account_id", ("SubAccountId",)),
    ("billing_account_name", ("BillingAccountName",)),
    ("sub_account_name", ("SubAccountName",)),
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
# A column is required (present, and non-empty in every row) when it is in REQUIRED_COLUMNS.
_TIMESTAMP_COLUMNS = (
    ("billing_period_start", "BillingPeriodStart"),
    ("billing_period_end", "BillingPeriodEnd"),
    ("charge_period_start", "ChargePeriodStart"),
    ("charge_period_end", "ChargePeriodEnd"),
)
_MONEY_COLUMNS = (
    ("list_cost", "ListCost"),
    ("contracted_cost", "ContractedCost"),
    ("billed_cost", "BilledCost"),
    ("effective_cost", "EffectiveCost"),
)


def _column_positions(
    header: Sequence[str], required_columns: Sequence[str], *, file_label: str
) -> dict[str, int]:
    """Lowercased column name -> its first position; ImportFormatError naming the required
    columns the header lacks."""
    positions: dict[str, int] = {}
    for index, name in enumerate(header):
        # FOCUS names are unique ignoring case; some exports vary the case (SkuPriceid).
        positions.setdefault(name.strip().lower(), index)
    missing = [name for name in required_columns if name.lower() not in positions]
    if missing:
        raise missing_columns_error("FOCUS", missing, file_label=file_label)
    return positions


class FocusRowBuilder:
    """Turns one row of raw cells (CSV text or Parquet values) into CostLineItem fields.

    The plan (which cell feeds which field, through which converter) is worked out once from
    the header, so the per-row work is a flat loop.

    Public so that exports in FOCUS shape that are not quite FOCUS (CoreWeave's usage-only
    export) can relax required_columns and finish each row in a subclass's build().

    With provider set (a provider's own FOCUS export: Azure's FocusCost, CoreWeave's usage),
    a row whose ProviderName names another provider is an error: that file belongs under
    --format focus, not under this provider's format.
    """

    def __init__(
        self,
        header: Sequence[str],
        *,
        file_label: str,
        required_columns: Sequence[str] = REQUIRED_COLUMNS,
        provider: str | None = None,
    ) -> None:
        self.file_label = file_label
        self.provider = provider
        self.width = len(header)
        positions = _column_positions(header, required_columns, file_label=file_label)

        def find(*names: str) -> tuple[str, int] | None:
            for name in names:
                if name.lower() in positions:
                    return name, positions[name.lower()]
            return None

        self.find = find
        self.plan = self._plan({name.lower() for name in required_columns})
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
        # This class's positions: a subclass's may need attributes it has not set yet.
        check_unique_columns(header, FocusRowBuilder.positions(self), file_label=file_label)

    def _plan(self, required: set[str]) -> list[PlanStep]:
        """Which cell feeds which field, through which converter, for the columns present."""
        find = self.find
        plan: list[PlanStep] = []
        for field, names in _STRING_COLUMNS:
            hit = find(*names)
            if hit is not None:
                plan.append((field, hit[0], hit[1], self._string(field), False))
        for field, name in _TIMESTAMP_COLUMNS:
            hit = find(name)
            if hit is not None:
                plan.append((field, name, hit[1], parse_timestamp, name.lower() in required))
        for field, name in _MONEY_COLUMNS:
            hit = find(name)
            if hit is not None:
                plan.append((field, name, hit[1], parse_money, name.lower() in required))
        for field, name, converter in (
            ("consumed_quantity", "ConsumedQuantity", parse_quantity),
            ("tags", "Tags", parse_json_object),
        ):
            hit = find(name)
            if hit is not None:
                plan.append((field, name, hit[1], converter, False))
        currency = find("BillingCurrency")
        if currency is not None:
            plan.append(("billing_currency", "BillingCurrency", currency[1], parse_currency, True))
        return plan

    @staticmethod
    def _string(field: str) -> Converter:
        limit = column_max_length(field)

        def convert(value: object) -> str:
            text = cell_text(value)
            if len(text) > limit:
                raise BadValue(f"value is longer than {limit} characters")
            return text

        return convert

    def build(self, cells: Sequence[object], row_number: int) -> LineItemRow:
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
            except BadValue as exc:
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
        # The plan's fields are CostLineItem field names by construction (_STRING_COLUMNS, ...).
        row = cast(LineItemRow, item)
        row["x_instance_type"] = self._instance_type(cells, row_number)
        start = row["billing_period_start"]
        row["billing_period"] = date(start.year, start.month, 1)
        self._check_row(row, row_number)
        return row

    def _check_row(self, item: LineItemRow, row_number: int) -> None:
        """Values fine alone but wrong together, or wrong for this import's provider."""
        provider: str = item["provider_name"]
        if self.provider is not None and provider and provider.lower() != self.provider.lower():
            raise ImportFormatError(
                f"is {provider!r}, but this import reads {self.provider}'s FOCUS export only; "
                "import other providers' FOCUS files with --format focus",
                file=self.file_label,
                row=row_number,
                column="ProviderName",
            )
        start, end = item.get("charge_period_start"), item.get("charge_period_end")
        if start is not None and end is not None and end < start:
            raise ImportFormatError(
                f"{end.isoformat()} is before ChargePeriodStart {start.isoformat()}",
                file=self.file_label,
                row=row_number,
                column="ChargePeriodEnd",
            )

    def positions(self) -> set[int]:
        """Header positions build() reads (Parquet reads only these columns)."""
        used = {entry[2] for entry in self.plan}
        used.update(position for _, position in self.instance_type_details)
        if self.instance_type_direct is not None:
            used.add(self.instance_type_direct[1])
        return used

    def _instance_type(self, cells: Sequence[object], row_number: int) -> str:
        found = ""
        if self.instance_type_direct is not None:
            found = cell_text(cells[self.instance_type_direct[1]])
        for _, position in self.instance_type_details:
            if found:
                break
            found = _instance_type_from_details(cells[position])
        limit = column_max_length("x_instance_type")
        if len(found) > limit:
            raise ImportFormatError(
                f"instance type is longer than {limit} characters",
                file=self.file_label,
                row=row_number,
                column="x_InstanceType",
            )
        return found

    # ------------------------------------------------------------------ columnar fast path

    def columnar(self) -> bool:
        """Whether build_table() builds what build() would: not for subclasses that finish
        rows in their own build()."""
        return type(self).build is FocusRowBuilder.build

    def build_table(self, columns: Sequence[Any]) -> LineItemTable:
        """build() for a whole chunk of CSV text columns at once (indexed by header position).
        Raises FallBack rather than any error: the per-row path reports errors."""
        import pyarrow as pa

        length = len(columns[0])
        out: dict[str, Any] = {
            field: constant_column(field, value, length) for field, value in self.defaults.items()
        }
        for field, _, position, convert, required in self.plan:
            raw = columns[position]
            if convert is parse_money or convert is parse_quantity:
                column = decimal_column(raw, convert, arrow_type(field))
            elif convert is parse_json_object:
                column = map_unique([raw], _json_text, pa.string())
            else:
                column = map_unique([raw], convert, arrow_type(field))
            if required:
                required_filled(column)
            out[field] = column
        out["x_instance_type"] = self._instance_type_column(columns, length)
        start = self.find("BillingPeriodStart")
        assert start is not None  # required
        out["billing_period"] = map_unique([columns[start[1]]], _period_of, pa.date32())
        self._check_table(out)
        return LineItemTable(pa.table(out))

    def _check_table(self, out: dict[str, Any]) -> None:
        """_check_row() for a chunk: FallBack where a row fails it (the per-row path names it)."""
        import pyarrow.compute as pc

        if self.provider is not None:
            found = set(pc.unique(out["provider_name"]).to_pylist())
            if {name.lower() for name in found} - {"", self.provider.lower()}:
                raise FallBack("another provider's rows")
        start, end = out.get("charge_period_start"), out.get("charge_period_end")
        if start is not None and end is not None and pc.any(pc.less(end, start)).as_py():
            raise FallBack("a charge period ends before it starts")

    def _instance_type_column(self, columns: Sequence[Any], length: int) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        found = constant_column("x_instance_type", "", length)
        if self.instance_type_direct is not None:
            found = map_unique([columns[self.instance_type_direct[1]]], cell_text, pa.string())
        for _, position in self.instance_type_details:
            details = map_unique([columns[position]], _instance_type_from_details, pa.string())
            found = pc.if_else(pc.equal(found, ""), details, found)
        within_length(found, column_max_length("x_instance_type"))
        return found


def _json_text(value: object) -> str:
    return json.dumps(parse_json_object(value))


def _period_of(value: object) -> date:
    start = parse_timestamp(value)
    if start is None:
        raise BadValue("empty")
    return date(start.year, start.month, 1)


# --------------------------------------------------------------------------- readers

MakeBuilder = Callable[[Sequence[str]], FocusRowBuilder]


def _chunked(
    rows: Iterable[tuple[int, Sequence[object]]], builder: FocusRowBuilder, chunk_size: int
) -> LineItemChunks:
    chunk: list[LineItemRow] = []
    for row_number, cells in rows:
        chunk.append(builder.build(cells, row_number))
        if len(chunk) >= chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _parse_csv(
    path: Path, *, file_label: str, compressed: bool, chunk_size: int, make_builder: MakeBuilder
) -> LineItemChunks:
    with open_text(path, compressed=compressed, file_label=file_label) as handle:
        reader = csv_reader(handle, file_label=file_label)
        header = csv_header(reader, file_label=file_label)
        try:
            builder = make_builder(header)
        except ImportFormatError as exc:
            raise exc.with_row(1) from None  # the header is row 1 of a CSV
        delivered = 0
        if builder.columnar():
            delivered, finished = yield from arrow_csv_tables(
                path,
                header,
                builder.build_table,
                compressed=compressed,
                chunk_size=chunk_size,
                file_label=file_label,
            )
            if finished and delivered:
                return
        rows = skip_rows(csv_rows(reader, file_label=file_label, header=header), delivered)
        seen = delivered > 0
        for chunk in _chunked(rows, builder, chunk_size):
            seen = True
            yield chunk
        if not seen:
            raise ImportFormatError("file has a header but no data rows", file=file_label)


@register_billing_parser("focus", database_free=True)
def parse_focus(path: Path, *, file_label: str, chunk_size: int | None = None) -> LineItemChunks:
    """Chunks of at most chunk_size (default CHUNK_ROWS) CostLineItem field dicts from a FOCUS
    CSV, gzip CSV (by magic bytes or .gz) or Parquet file."""
    chunk_size = chunk_size or CHUNK_ROWS
    return read_focus_file(
        path,
        file_label=file_label,
        chunk_size=chunk_size,
        make_builder=lambda header: FocusRowBuilder(header, file_label=file_label),
    )


def read_focus_file(
    path: Path, *, file_label: str, chunk_size: int, make_builder: MakeBuilder
) -> LineItemChunks:
    """Chunks of rows built by make_builder(header) from a FOCUS-shaped CSV, gzip CSV (by magic
    bytes or .gz) or Parquet file: the reading half of parse_focus, for FOCUS-shaped exports
    whose rows need more than FocusRowBuilder does."""
    magic = read_magic(path)
    if magic == PARQUET_MAGIC or path.suffix.lower() == ".parquet":
        return parquet_chunks(
            path, file_label=file_label, chunk_size=chunk_size, make_builder=make_builder
        )
    compressed = magic[:2] == GZIP_MAGIC or path.suffix.lower() == ".gz"
    return _parse_csv(
        path,
        file_label=file_label,
        compressed=compressed,
        chunk_size=chunk_size,
        make_builder=make_builder,
    )
