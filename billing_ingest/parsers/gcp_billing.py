"""Google Cloud BigQuery billing export (detailed, resource-level usage cost) as exported files.

Three shapes, told apart by content rather than by file name:
- Parquet (magic PAR1): nested structs (service.description is a struct field);
- JSON lines (first non-blank character "{"): nested objects, `credits` a list of objects;
- CSV: dotted column names (service.description), repeated fields written as JSON or, in older
  flattened files, as a Python repr ([{'name': ..., 'amount': -5e-06, 'full_name': None}]).
Any of them may be gzip-compressed. Nested records are flattened to the CSV's dotted names, so one
mapper serves all three.

Money: Google invoices cost + credits (credit amounts are negative: free tier, promotions,
sustained and committed use discounts, ...), so BilledCost = EffectiveCost = cost +
sum(credits.amount), exactly: every amount is the Decimal of the digits the file wrote (a Python
repr's -5e-06 is -0.000005, never a float's binary expansion). ContractedCost = cost (the price
before credits), ListCost = cost_at_list where the export has it, else cost. The credits stay on
the row they reduce (x_credits: type, name, amount, id), so they are attributed exactly like its
usage and the FOCUS export shows them (x_Credits). A line item belongs to its invoice.month (a
usage on 31 August on the September invoice is September's).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.bounds import (
    json_depth_exceeds,
    max_json_depth,
)
from billing_ingest.parsers.gcp_billing_files import (
    _LABEL_COLUMNS,
    REQUIRED_COLUMNS,
    _parquet_records,
    _text_records,
)
from billing_ingest.parsers.rows import LineItemRow, row_text
from billing_ingest.parsers.values import (
    CHUNK_ROWS,
    GZIP_MAGIC,
    PARQUET_MAGIC,
    BadValue,
    built_chunks,
    cell_text,
    column_max_length,
    is_null,
    parse_currency,
    parse_money,
    parse_quantity,
    parse_timestamp,
    read_magic,
)
from finops.core.errors import ImportFormatError
from finops.core.months import month_next

PROVIDER_NAME = "Google Cloud"


_CHARGE_CATEGORY = {
    "regular": "Usage",
    "tax": "Tax",
    "adjustment": "Adjustment",
    "rounding_error": "Adjustment",
}
_DYNAMIC_RE = re.compile(r"\b(?:preemptible|spot)\b", re.IGNORECASE)
_COMMITTED_RE = re.compile(r"\bcommitment\b", re.IGNORECASE)
_MACHINE_SPEC_LABEL = "compute.googleapis.com/machine_spec"
# A machine type spelled out in a SKU description: a3-highgpu-8g, n1-standard-4.
_MACHINE_TYPE_RE = re.compile(r"\b([a-z][0-9][a-z]?-[a-z]+-[0-9]+[a-z]?)\b", re.IGNORECASE)
_INVOICE_MONTH_RE = re.compile(r"^(\d{4})(\d{2})$")

# Text fields with a length limit -> the column an overlong value comes from.
_FIELD_SOURCE = {
    "billing_account_id": "billing_account_id",
    "sub_account_id": "project.id",
    "sub_account_name": "project.name",
    "service_name": "service.description",
    "sku_id": "sku.id",
    "region_id": "location.region",
    "resource_id": "resource.global_name",
    "resource_name": "resource.name",
    "consumed_unit": "usage.unit",
    "x_instance_type": "system_labels",
}


# --------------------------------------------------------------------------- value converters


def _gcp_timestamp(value: object) -> datetime:
    """BigQuery timestamps: ISO 8601 (space or T, +00:00 or Z), BigQuery's own text form
    "2022-08-01 00:00:00 UTC", or a Parquet timestamp. Naive values are UTC."""
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(" UTC"):
            text = text[: -len(" UTC")] + "+00:00"
        value = text
    stamp = parse_timestamp(value)
    if stamp is None:
        raise BadValue("is empty")
    return stamp


def _invoice_month(value: object) -> date:
    text = cell_text(value)
    match = _INVOICE_MONTH_RE.match(text)
    if match is None or not 1 <= int(match[2]) <= 12:
        raise BadValue(f"{text!r} is not an invoice month (YYYYMM)")
    return date(int(match[1]), int(match[2]), 1)


def _repeated(value: object) -> list[Any]:
    """A repeated field: a list already (JSON lines, Parquet), or CSV text holding JSON or a
    Python repr. The repr is read by _python_literal, which evaluates literals only."""
    if is_null(value):
        return []
    if isinstance(value, list | tuple):
        return list(value)
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, str):
        raise BadValue(f"{value!r} is not a list")
    text = value.strip()
    if json_depth_exceeds(text, max_json_depth()):
        raise BadValue(f"JSON nests deeper than {max_json_depth()} levels (FINOPS_MAX_JSON_DEPTH)")
    try:
        parsed = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError:
        try:
            parsed = _python_literal(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, ArithmeticError):
            raise BadValue(f"{text[:80]!r} is neither JSON nor a Python literal list") from None
    if isinstance(parsed, dict):
        return [parsed]
    if not isinstance(parsed, list):
        raise BadValue(f"{text[:80]!r} is not a list")
    return parsed


def _python_literal(text: str) -> Any:
    """A Python literal as str() of a list of dicts writes it ([{'amount': -5e-06, 'full_name':
    None}]), read as ast.literal_eval reads it (literals only: nothing is run, a call or a name
    is refused), except that every number is the Decimal of its own digits: literal_eval would
    make -5e-06 a float, whose binary expansion is not -0.000005."""
    tree = ast.parse(text, mode="eval")
    return _literal(tree.body, text.encode("utf-8").split(b"\n"))


def _number_text(node: ast.expr, lines: list[bytes]) -> str:
    # Offsets are UTF-8 byte offsets; a number never spans lines.
    if node.end_lineno != node.lineno or node.end_col_offset is None:
        raise ValueError("a number across lines")
    return lines[node.lineno - 1][node.col_offset : node.end_col_offset].decode("utf-8")


def _literal(node: ast.expr, lines: list[bytes]) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, int | float):
            return Decimal(_number_text(node, lines))
        raise ValueError(f"{value!r} is not a billing value")
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        number = Decimal(_number_text(node.operand, lines))
        return -number if isinstance(node.op, ast.USub) else number
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(item, lines) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise ValueError("** in a literal")
        return {
            _literal(key, lines): _literal(item, lines)
            for key, item in zip(node.keys, node.values, strict=True)
            if key is not None
        }
    raise ValueError(f"{type(node).__name__} is not a literal")


def _credits(value: object) -> tuple[Decimal, list[dict[str, Any]]]:
    """(the sum of the credits' amounts, the credits as stored: every key the export gave, the
    amount as exact decimal text)."""
    total = Decimal(0)
    kept: list[dict[str, Any]] = []
    for credit in _repeated(value):
        if not isinstance(credit, dict) or "amount" not in credit:
            raise BadValue(f"credit {credit!r} has no amount")
        amount = parse_money(credit["amount"])
        entry = {str(key): _json_safe(item) for key, item in credit.items()}
        entry["amount"] = None if amount is None else _plain(amount)
        kept.append(entry)
        if amount is not None:
            total += amount
    return total, kept


def _plain(amount: Decimal) -> str:
    """-0.000005000000 -> "-0.000005": fixed point, no exponent, no trailing zeros."""
    text = format(amount, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _json_safe(value: object) -> Any:
    if isinstance(value, Decimal):
        return _plain(value)
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _labels(value: object) -> dict[str, str]:
    """Labels as [{key, value}, ...] (BigQuery's shape) or a plain {key: value} mapping."""
    if isinstance(value, dict) and "key" not in value:
        return {str(key): cell_text(item) for key, item in value.items()}
    labels: dict[str, str] = {}
    for entry in _repeated(value):
        if isinstance(entry, dict) and "key" in entry:
            labels[str(entry["key"])] = cell_text(entry.get("value"))
        elif isinstance(entry, list | tuple) and len(entry) == 2:
            labels[str(entry[0])] = cell_text(entry[1])
        else:
            raise BadValue(f"label {entry!r} is not a {{key, value}} pair")
    return labels


def _pricing_category(sku_description: str) -> str:
    if _DYNAMIC_RE.search(sku_description):
        return "Dynamic"
    if _COMMITTED_RE.search(sku_description):
        return "Committed"
    return "Standard"


def _instance_type(system_labels: dict[str, str], sku_description: str) -> str:
    spec = system_labels.get(_MACHINE_SPEC_LABEL, "").strip()
    if spec:
        return spec
    match = _MACHINE_TYPE_RE.search(sku_description)
    return match[1].lower() if match else ""


# --------------------------------------------------------------------------- row mapper


class _GcpRow:
    """Maps one flattened export record to CostLineItem fields."""

    def __init__(self, *, file_label: str) -> None:
        self.file_label = file_label
        self.limits = {field: column_max_length(field) for field in _FIELD_SOURCE}

    def _convert(self, record: dict[str, Any], column: str, row: int, convert: Any) -> Any:
        try:
            return convert(record.get(column))
        except BadValue as exc:
            raise ImportFormatError(
                str(exc), file=self.file_label, row=row, column=column
            ) from None

    def build(self, record: dict[str, Any], row: int) -> LineItemRow:
        for column in REQUIRED_COLUMNS:
            if column not in record:
                raise ImportFormatError(
                    "missing required column", file=self.file_label, row=row, column=column
                )
            if is_null(record[column]):
                raise ImportFormatError(
                    "is empty but a value is required",
                    file=self.file_label,
                    row=row,
                    column=column,
                )
        period = self._convert(record, "invoice.month", row, _invoice_month)
        next_period = month_next(period)
        cost = self._convert(record, "cost", row, parse_money)
        credits, credit_list = self._convert(record, "credits", row, _credits)
        list_cost = self._convert(record, "cost_at_list", row, parse_money)

        cost_type = cell_text(record.get("cost_type")).lower() or "regular"
        category = _CHARGE_CATEGORY.get(cost_type)
        if category is None:
            raise ImportFormatError(
                f"unknown cost_type {cost_type!r}; expected regular, tax, adjustment or "
                "rounding_error",
                file=self.file_label,
                row=row,
                column="cost_type",
            )
        tags: dict[str, str] = {}
        system_labels: dict[str, str] = {}
        for column in _LABEL_COLUMNS:
            labels = self._convert(record, column, row, _labels)
            if column == "system_labels":
                system_labels = labels
            tags.update(labels)
        sku_description = cell_text(record.get("sku.description"))
        usage = category == "Usage"
        resource_name = cell_text(record.get("resource.name"))

        item: LineItemRow = {
            "billing_period": period,
            "billing_period_start": datetime(period.year, period.month, 1, tzinfo=UTC),
            "billing_period_end": datetime(next_period.year, next_period.month, 1, tzinfo=UTC),
            "provider_name": PROVIDER_NAME,
            "billing_account_id": cell_text(record.get("billing_account_id")),
            "sub_account_id": cell_text(record.get("project.id")),
            "billing_account_name": "",  # the export has the account's id only
            "sub_account_name": cell_text(record.get("project.name")),
            "charge_period_start": self._convert(record, "usage_start_time", row, _gcp_timestamp),
            "charge_period_end": self._convert(record, "usage_end_time", row, _gcp_timestamp),
            "charge_category": category,
            "pricing_category": _pricing_category(sku_description) if usage else "",
            "service_category": "",
            "service_name": cell_text(record.get("service.description")),
            "sku_id": cell_text(record.get("sku.id")),
            "region_id": cell_text(record.get("location.region")),
            "resource_id": cell_text(record.get("resource.global_name")) or resource_name,
            "resource_name": resource_name,
            "resource_type": "",
            "commitment_discount_id": "",
            "commitment_discount_status": "",
            "commitment_discount_type": "",
            "consumed_quantity": (
                self._convert(record, "usage.amount", row, parse_quantity) if usage else None
            ),
            "consumed_unit": cell_text(record.get("usage.unit")) if usage else "",
            "list_cost": cost if list_cost is None else list_cost,
            "contracted_cost": cost,
            # What Google invoices: the cost less the credits on the row.
            "billed_cost": cost + credits,
            "effective_cost": cost + credits,
            "billing_currency": self._convert(record, "currency", row, parse_currency),
            "tags": tags,
            "x_credits": credit_list,
            "x_instance_type": _instance_type(system_labels, sku_description),
            "x_gpu_count": None,
            "x_gpu_model": "",
        }
        for field, limit in self.limits.items():
            if len(row_text(item, field)) > limit:
                raise ImportFormatError(
                    f"value is longer than {limit} characters ({field})",
                    file=self.file_label,
                    row=row,
                    column=_FIELD_SOURCE[field],
                )
        if item["charge_period_end"] < item["charge_period_start"]:
            raise ImportFormatError(
                "is before usage_start_time", file=self.file_label, row=row, column="usage_end_time"
            )
        return item


@register_billing_parser("gcp-bigquery")
def parse_gcp_billing(
    path: Path, *, file_label: str, chunk_size: int = CHUNK_ROWS
) -> LineItemChunks:
    """Chunks of CostLineItem field dicts from a BigQuery billing export file (CSV, JSON lines
    or Parquet, optionally gzip-compressed)."""
    magic = read_magic(path)
    records: Iterator[tuple[int, dict[str, Any]]]
    if magic == PARQUET_MAGIC:
        records = _parquet_records(path, file_label=file_label, chunk_size=chunk_size)
    else:
        compressed = magic[:2] == GZIP_MAGIC
        records = _text_records(path, file_label=file_label, compressed=compressed)
    mapper = _GcpRow(file_label=file_label)
    no_data = ImportFormatError("file has no data rows", file=file_label)
    return built_chunks(records, mapper.build, chunk_size=chunk_size, empty_error=no_data)
