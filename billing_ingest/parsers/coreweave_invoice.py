"""CoreWeave per-namespace invoice lines, as a CSV we define (CoreWeave has no published schema).

Columns (header names matched ignoring case; a UTF-8 BOM and gzip are fine):

=================  ========  ===========================================================
invoice_month      required  YYYY-MM: the invoice (billing period) the line is on
namespace          required  CoreWeave namespace (org/tenant) -> SubAccountId
instance_type      required  e.g. gd-8xh100ib-i128 -> x_InstanceType and SkuId
amount             required  invoiced amount -> BilledCost and EffectiveCost
currency           required  ISO 4217 code
quantity           optional  e.g. node-hours -> ConsumedQuantity
unit               optional  default "Hours" -> ConsumedUnit
rate               optional  contract rate per unit; quantity x rate -> ContractedCost
pricing_category   optional  Standard (default) / Committed / Dynamic
invoice_id         optional  -> BillingAccountId (which invoice the line came from)
=================  ========  ===========================================================

The invoiced amount is authoritative (an invoice may round or discount): it is not recomputed
from quantity x rate. A line's charge period is its whole invoice month, because an invoice line
says nothing finer; attribution spreads it over that month.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.bounds import csv_reader
from billing_ingest.parsers.checks import check_unique_columns, missing_columns_error
from billing_ingest.parsers.coreweave import DEFAULT_PRICING_CATEGORY, PROVIDER_NAME, price
from billing_ingest.parsers.rows import LineItemRow, row_text
from billing_ingest.parsers.values import (
    CHUNK_ROWS,
    GZIP_MAGIC,
    BadValue,
    built_chunks,
    cell_text,
    column_max_length,
    csv_header,
    csv_rows,
    open_text,
    parse_currency,
    parse_money,
    parse_quantity,
    read_magic,
)
from finops.core.errors import ImportFormatError
from finops.core.months import month_next

REQUIRED = ("invoice_month", "namespace", "instance_type", "amount", "currency")
OPTIONAL = ("quantity", "unit", "rate", "pricing_category", "invoice_id")
_MONTH_RE = re.compile(r"^(\d{4})-(\d{2})$")
_PRICING = {"standard": "Standard", "committed": "Committed", "dynamic": "Dynamic"}
# CostLineItem field -> invoice column, for length checks.
_LIMITED = {
    "sub_account_id": "namespace",
    "x_instance_type": "instance_type",
    "billing_account_id": "invoice_id",
    "consumed_unit": "unit",
}


def _month(value: object) -> date:
    match = _MONTH_RE.match(cell_text(value))
    if match is None or not 1 <= int(match[2]) <= 12:
        raise BadValue(f"{cell_text(value)!r} is not a YYYY-MM month")
    return date(int(match[1]), int(match[2]), 1)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


class _InvoiceRow:
    """One invoice line (cells in header order) -> CostLineItem fields."""

    def __init__(self, header: Sequence[str], *, file_label: str) -> None:
        self.file_label = file_label
        self.width = len(header)
        positions: dict[str, int] = {}
        for index, name in enumerate(header):
            positions.setdefault(name.strip().lower(), index)
        missing = [name for name in REQUIRED if name not in positions]
        if missing:
            raise missing_columns_error("CoreWeave invoice", missing, file_label=file_label, row=1)
        self.positions = {
            name: positions[name] for name in (*REQUIRED, *OPTIONAL) if name in positions
        }
        try:
            check_unique_columns(header, self.positions.values(), file_label=file_label)
        except ImportFormatError as exc:
            raise exc.with_row(1) from None
        self.limits = {field: column_max_length(field) for field in _LIMITED}

    def _cell(self, cells: Sequence[object], column: str) -> object:
        position = self.positions.get(column)
        return None if position is None else cells[position]

    def _convert(self, cells: Sequence[object], column: str, row: int, convert: Any) -> Any:
        try:
            value = convert(self._cell(cells, column))
        except BadValue as exc:
            raise self._error(str(exc), row, column) from None
        if column in REQUIRED and (value is None or value == ""):
            raise self._error("is empty but required", row, column)
        return value

    def _error(self, message: str, row: int, column: str) -> ImportFormatError:
        return ImportFormatError(message, file=self.file_label, row=row, column=column)

    def build(self, cells: Sequence[object], row: int) -> LineItemRow:
        if len(cells) != self.width:
            raise ImportFormatError(
                f"has {len(cells)} values but the header has {self.width} columns",
                file=self.file_label,
                row=row,
            )
        month: date = self._convert(cells, "invoice_month", row, _month)
        instance_type: str = self._convert(cells, "instance_type", row, cell_text)
        amount = self._convert(cells, "amount", row, parse_money)
        quantity = self._convert(cells, "quantity", row, parse_quantity)
        rate = self._convert(cells, "rate", row, parse_money)
        category_text = cell_text(self._cell(cells, "pricing_category"))
        category = _PRICING.get(category_text.lower(), "") if category_text else ""
        if category_text and not category:
            raise self._error(
                f"{category_text!r} is not Standard, Committed or Dynamic", row, "pricing_category"
            )
        item: LineItemRow = {
            "billing_period": month,
            "billing_period_start": _midnight(month),
            "billing_period_end": _midnight(month_next(month)),
            "provider_name": PROVIDER_NAME,
            "billing_account_id": cell_text(self._cell(cells, "invoice_id")),
            "sub_account_id": self._convert(cells, "namespace", row, cell_text),
            "charge_period_start": _midnight(month),
            "charge_period_end": _midnight(month_next(month)),
            "charge_category": "Usage",
            "pricing_category": category or DEFAULT_PRICING_CATEGORY,
            "service_category": "Compute",
            "service_name": "",
            "sku_id": instance_type,
            "region_id": "",
            "resource_id": "",
            "resource_name": "",
            "resource_type": "",
            "commitment_discount_id": "",
            "commitment_discount_status": "",
            "commitment_discount_type": "",
            "consumed_quantity": quantity,
            "consumed_unit": cell_text(self._cell(cells, "unit")) or "Hours",
            "list_cost": None,
            "contracted_cost": (
                price(quantity, rate) if quantity is not None and rate is not None else None
            ),
            "billed_cost": amount,
            "effective_cost": amount,
            "billing_currency": self._convert(cells, "currency", row, parse_currency),
            "tags": {},
            "x_instance_type": instance_type,
            "x_gpu_count": None,
            "x_gpu_model": "",
        }
        for field, column in _LIMITED.items():
            if len(row_text(item, field)) > self.limits[field]:
                raise self._error(
                    f"value is longer than {self.limits[field]} characters", row, column
                )
        return item


@register_billing_parser("coreweave-invoice")
def parse_coreweave_invoice(
    path: Path, *, file_label: str, chunk_size: int = CHUNK_ROWS
) -> LineItemChunks:
    """Chunks of CostLineItem field dicts from a CoreWeave per-namespace invoice CSV."""
    compressed = read_magic(path)[:2] == GZIP_MAGIC or path.suffix.lower() == ".gz"
    with open_text(path, compressed=compressed, file_label=file_label) as handle:
        reader = csv_reader(handle, file_label=file_label)
        header = csv_header(reader, file_label=file_label)
        mapper = _InvoiceRow(header, file_label=file_label)
        no_data = ImportFormatError("file has a header but no data rows", file=file_label)
        rows = csv_rows(reader, file_label=file_label, header=header)
        yield from built_chunks(rows, mapper.build, chunk_size=chunk_size, empty_error=no_data)
