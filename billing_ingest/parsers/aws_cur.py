"""AWS Cost and Usage Reports, CUR 2.0 (Data Exports) and legacy CUR, mapped onto FOCUS columns.

Flavour comes from the header: legacy CUR CSV names columns ``lineItem/UsageStartDate``; CUR 2.0
(and legacy CUR delivered as Parquet / Athena) names them ``line_item_usage_start_date``. Columns
are matched on a "squashed" name (lowercase, letters and digits only), so both spellings and the
two ARN spellings AWS uses (``savingsPlan/SavingsPlanARN``, ``savingsPlan/SavingsPlanArn``,
``savings_plan_savings_plan_a_r_n``) all land on the same column.

Files are CSV (plain, gzip or a one-member zip, recognised by magic bytes) or Parquet, read in
chunks: CSV row by row through the csv module, Parquet one record batch at a time, only the
columns used.

Mapping decisions (beyond the obvious one-to-one columns):
- EffectiveCost is AWS's amortised cost by line item type (see ``_effective_cost``).
- SavingsPlanNegation is ChargeCategory Usage (PricingCategory Committed, status Used): it
  cancels the on-demand cost of covered usage on the invoice, so in FOCUS terms it is part of that
  usage (covered usage plus its negation bills 0, as FOCUS wants for commitment-covered usage). It
  is not a Credit: nothing is refunded; and its EffectiveCost is 0.
- RIFee and SavingsPlanRecurringFee are Purchases whose EffectiveCost is the unused commitment;
  they carry CommitmentDiscountStatus "Unused" so attribution can tell idle commitment apart.
- Tags: legacy ``resourceTags/user:team`` gives {"user:team": v, "team": v}; CUR 2.0's
  ``resource_tags`` map key ``user_team`` (and Athena-style ``resource_tags_user_team`` columns)
  gives {"user_team": v, "team": v}. The original key is always kept; the key without the
  ``user:``/``user_`` prefix is added (never overwriting) so a plain ``team`` tag rule matches
  every flavour. AWS-generated tags (``aws:createdBy``) are kept as they are. Empty values are
  dropped: legacy CSV cannot tell "no tag" from "empty tag".
- Missing amortisation columns are an error only when a row needs them; an empty cell is 0
  (AWS leaves non-applicable cells blank).
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

from django.conf import settings

from billing_ingest.errors import ImportFormatError
from billing_ingest.models import MONEY_QUANTUM
from billing_ingest.parsers import LineItemChunks, register_billing_parser
from billing_ingest.parsers.checks import check_cells, check_record_batch, check_unique_columns
from billing_ingest.parsers.lines import CappedText
from billing_ingest.parsers.values import (
    CHUNK_ROWS,
    GZIP_MAGIC,
    PARQUET_MAGIC,
    BadValue,
    FallBack,
    LineItemTable,
    ParquetRow,
    arrow_chunks,
    arrow_csv_batches,
    arrow_type,
    built_chunks,
    cell_text,
    column_max_length,
    constant_column,
    csv_rows,
    decimal_column,
    map_unique,
    open_text,
    parse_currency,
    parse_json_object,
    parse_money,
    parse_quantity,
    parse_timestamp,
    read_magic,
    required_filled,
    skip_rows,
    unique_results,
    within_length,
)

_ZIP_MAGIC = b"PK\x03\x04"
ZERO = Decimal(0).quantize(MONEY_QUANTUM)

LEGACY = "legacy"
CUR2 = "cur2"


@dataclass(frozen=True)
class _Column:
    snake: str  # CUR 2.0 / Athena spelling
    legacy: str  # legacy CUR CSV spelling

    def name(self, flavour: str) -> str:
        return self.legacy if flavour == LEGACY else self.snake


def _col(snake: str, legacy: str) -> _Column:
    return _Column(snake, legacy)


COLUMNS: dict[str, _Column] = {
    "line_item_type": _col("line_item_line_item_type", "lineItem/LineItemType"),
    "usage_start": _col("line_item_usage_start_date", "lineItem/UsageStartDate"),
    "usage_end": _col("line_item_usage_end_date", "lineItem/UsageEndDate"),
    "unblended_cost": _col("line_item_unblended_cost", "lineItem/UnblendedCost"),
    "billing_period_start": _col("bill_billing_period_start_date", "bill/BillingPeriodStartDate"),
    "billing_period_end": _col("bill_billing_period_end_date", "bill/BillingPeriodEndDate"),
    "payer_account": _col("bill_payer_account_id", "bill/PayerAccountId"),
    "usage_account": _col("line_item_usage_account_id", "lineItem/UsageAccountId"),
    "usage_type": _col("line_item_usage_type", "lineItem/UsageType"),
    "product_code": _col("line_item_product_code", "lineItem/ProductCode"),
    "resource_id": _col("line_item_resource_id", "lineItem/ResourceId"),
    "currency": _col("line_item_currency_code", "lineItem/CurrencyCode"),
    "usage_amount": _col("line_item_usage_amount", "lineItem/UsageAmount"),
    "pricing_unit": _col("pricing_unit", "pricing/unit"),
    "public_on_demand_cost": _col("pricing_public_on_demand_cost", "pricing/publicOnDemandCost"),
    "product_name": _col("product_product_name", "product/ProductName"),
    "sku": _col("product_sku", "product/sku"),
    "region_code": _col("product_region_code", "product/regionCode"),
    "region": _col("product_region", "product/region"),
    "instance_type": _col("product_instance_type", "product/instanceType"),
    "reservation_arn": _col("reservation_reservation_a_r_n", "reservation/ReservationARN"),
    "reservation_effective_cost": _col("reservation_effective_cost", "reservation/EffectiveCost"),
    "reservation_unused_upfront": _col(
        "reservation_unused_amortized_upfront_fee_for_billing_period",
        "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod",
    ),
    "reservation_unused_recurring": _col(
        "reservation_unused_recurring_fee", "reservation/UnusedRecurringFee"
    ),
    "savings_plan_arn": _col("savings_plan_savings_plan_a_r_n", "savingsPlan/SavingsPlanARN"),
    "savings_plan_effective_cost": _col(
        "savings_plan_savings_plan_effective_cost", "savingsPlan/SavingsPlanEffectiveCost"
    ),
    "savings_plan_total_commitment": _col(
        "savings_plan_total_commitment_to_date", "savingsPlan/TotalCommitmentToDate"
    ),
    "savings_plan_used_commitment": _col(
        "savings_plan_used_commitment", "savingsPlan/UsedCommitment"
    ),
}
REQUIRED = ("line_item_type", "usage_start", "usage_end", "unblended_cost", "billing_period_start")

# CUR 2.0 nests most product attributes in the `product` map (product['product_name']); the key
# there is the flat column's name without its "product_" prefix.
_PRODUCT_MAP_FALLBACK = ("product_name", "sku", "region_code", "region", "instance_type")

_CHARGE_CATEGORY = {
    "Usage": "Usage",
    "DiscountedUsage": "Usage",
    "SavingsPlanCoveredUsage": "Usage",
    "SavingsPlanNegation": "Usage",
    "Tax": "Tax",
    "Credit": "Credit",
    "Refund": "Credit",
    "Discount": "Credit",
    "BundledDiscount": "Credit",
    "RIFee": "Purchase",
    "SavingsPlanRecurringFee": "Purchase",
    "SavingsPlanUpfrontFee": "Purchase",
    "Fee": "Purchase",
}
_COMMITTED = {
    "DiscountedUsage",
    "SavingsPlanCoveredUsage",
    "SavingsPlanNegation",
    "RIFee",
    "SavingsPlanRecurringFee",
}
_COMMITMENT_USED = {"DiscountedUsage", "SavingsPlanCoveredUsage", "SavingsPlanNegation"}
_COMMITMENT_UNUSED = {"RIFee", "SavingsPlanRecurringFee"}
# Rows that consume something; a negation only cancels cost, counting its quantity would double.
_CONSUMING = {"Usage", "DiscountedUsage", "SavingsPlanCoveredUsage"}

_SQUASH_RE = re.compile(r"[^a-z0-9]")


def _squash(name: str) -> str:
    return _SQUASH_RE.sub("", name.lower())


def charge_category(line_item_type: str) -> str:
    found = _CHARGE_CATEGORY.get(line_item_type)
    if found is not None:
        return found
    # EdpDiscount, PrivateRateDiscount, SppDiscount, DistributorDiscount, ...
    if line_item_type.endswith("Discount"):
        return "Credit"
    # A type AWS adds later: kept (BilledCost = EffectiveCost), flagged for review.
    return "Adjustment"


def pricing_category(line_item_type: str, category: str, usage_type: str) -> str:
    if category not in ("Usage", "Purchase"):
        return ""
    if line_item_type in _COMMITTED:
        return "Committed"
    if category == "Usage" and "SpotUsage" in usage_type:
        return "Dynamic"
    return "Standard"


def _strip_user_prefix(key: str) -> str:
    for prefix in ("user:", "user_"):
        if key.startswith(prefix) and len(key) > len(prefix):
            return key[len(prefix) :]
    return key


class _CurRowBuilder:
    """One CUR row (CSV text or Parquet values) -> CostLineItem fields; the plan is made once."""

    def __init__(self, header: Sequence[str], *, file_label: str) -> None:
        self.file_label = file_label
        self.width = len(header)
        self.flavour = self._detect_flavour(header)
        squashed: dict[str, tuple[str, int]] = {}
        self.tag_columns: list[tuple[str, int]] = []
        self.tag_map: tuple[str, int] | None = None
        self.product_map: tuple[str, int] | None = None
        for position, raw_name in enumerate(header):
            name = raw_name.strip()
            lowered = name.lower()
            if lowered.startswith("resourcetags/"):
                self.tag_columns.append((name[len("resourceTags/") :], position))
            elif lowered.startswith("resource_tags_"):
                self.tag_columns.append((name[len("resource_tags_") :], position))
            elif lowered == "resource_tags":
                self.tag_map = (name, position)
            elif lowered == "product":
                self.product_map = (name, position)
            else:
                squashed.setdefault(_squash(name), (name, position))
        self.columns: dict[str, tuple[str, int]] = {}
        for key, column in COLUMNS.items():
            hit = squashed.get(_squash(column.snake))
            if hit is not None:
                self.columns[key] = hit
        missing = [key for key in REQUIRED if key not in self.columns]
        if missing:
            names = [COLUMNS[key].name(self.flavour) for key in missing]
            raise ImportFormatError(
                f"missing required AWS CUR column(s): {', '.join(names)}",
                file=file_label,
                column=names[0],
            )
        mapped = [position for _, position in self.columns.values()]
        check_unique_columns(header, mapped, file_label=file_label, key=_squash)
        self.default_currency: str = settings.FINOPS_DEFAULT_CURRENCY

    def _detect_flavour(self, header: Sequence[str]) -> str:
        names = [name.strip() for name in header]
        if any(name.lower() == "lineitem/lineitemtype" for name in names):
            return LEGACY
        if any(name.lower() == "line_item_line_item_type" for name in names):
            return CUR2
        if any("/" in name for name in names):
            return LEGACY
        if any(name.lower().startswith("line_item_") for name in names):
            return CUR2
        raise ImportFormatError(
            "not an AWS CUR file: no lineItem/LineItemType or line_item_line_item_type column",
            file=self.file_label,
            column="line_item_line_item_type",
        )

    def positions(self) -> set[int]:
        """Header positions the builder reads (Parquet reads only these columns)."""
        used = {position for _, position in self.columns.values()}
        used.update(position for _, position in self.tag_columns)
        for extra in (self.tag_map, self.product_map):
            if extra is not None:
                used.add(extra[1])
        return used

    # ------------------------------------------------------------------ cell access

    def _error(self, message: str, row: int, column: str) -> ImportFormatError:
        return ImportFormatError(message, file=self.file_label, row=row, column=column)

    def _convert(self, cells: Sequence[object], row: int, key: str, convert: Any) -> Any:
        hit = self.columns.get(key)
        if hit is None:
            return None
        try:
            return convert(cells[hit[1]])
        except BadValue as exc:
            raise self._error(str(exc), row, hit[0]) from None

    def _required(self, cells: Sequence[object], row: int, key: str, convert: Any) -> Any:
        value = self._convert(cells, row, key, convert)
        if value is None or value == "":
            raise self._error("is empty but AWS CUR always fills it", row, self.columns[key][0])
        return value

    def _string(self, cells: Sequence[object], key: str) -> str:
        hit = self.columns.get(key)
        return "" if hit is None else cell_text(cells[hit[1]])

    def _needed_amount(
        self, cells: Sequence[object], row: int, key: str, line_item_type: str
    ) -> Decimal:
        if key not in self.columns:
            name = COLUMNS[key].name(self.flavour)
            raise self._error(
                f"the file has no such column, but {line_item_type} rows need it", row, name
            )
        value: Decimal | None = self._convert(cells, row, key, parse_money)
        return ZERO if value is None else value

    def _product(self, cells: Sequence[object], row: int) -> dict[str, Any]:
        if self.product_map is None:
            return {}
        try:
            return parse_json_object(cells[self.product_map[1]])
        except BadValue as exc:
            raise self._error(str(exc), row, self.product_map[0]) from None

    # ------------------------------------------------------------------ row

    def build(self, cells: Sequence[object], row: int) -> dict[str, Any]:
        if len(cells) > self.width:
            raise ImportFormatError(
                f"has {len(cells)} values but the header has {self.width} columns",
                file=self.file_label,
                row=row,
            )
        if len(cells) < self.width:
            # Missing trailing cells are empty, as csv.DictReader reads them (koku's test CUR
            # omits its last, costCategory, column); a required column left empty still fails.
            cells = [*cells, *([""] * (self.width - len(cells)))]
        line_item_type: str = self._required(cells, row, "line_item_type", cell_text)
        billing_period_start: datetime = self._required(
            cells, row, "billing_period_start", parse_timestamp
        )
        billed: Decimal = self._required(cells, row, "unblended_cost", parse_money)
        category = charge_category(line_item_type)
        usage_type = self._string(cells, "usage_type")
        reservation_arn = self._string(cells, "reservation_arn")
        savings_plan_arn = self._string(cells, "savings_plan_arn")
        tags = self._tags(cells, row)
        product = self._product_fields(cells, row)
        consuming = line_item_type in _CONSUMING
        item: dict[str, Any] = {
            "billing_period": date(billing_period_start.year, billing_period_start.month, 1),
            "billing_period_start": billing_period_start,
            "billing_period_end": self._convert(cells, row, "billing_period_end", parse_timestamp),
            "provider_name": "AWS",
            "billing_account_id": self._string(cells, "payer_account"),
            "sub_account_id": self._string(cells, "usage_account"),
            "charge_period_start": self._required(cells, row, "usage_start", parse_timestamp),
            "charge_period_end": self._required(cells, row, "usage_end", parse_timestamp),
            "charge_category": category,
            "pricing_category": pricing_category(line_item_type, category, usage_type),
            "service_category": "",
            "service_name": product["product_name"] or self._string(cells, "product_code"),
            "sku_id": product["sku"],
            "region_id": product["region_code"] or product["region"],
            "resource_id": self._string(cells, "resource_id"),
            "resource_name": tags.get("Name") or tags.get("name") or "",
            "resource_type": "",
            "consumed_quantity": (
                self._convert(cells, row, "usage_amount", parse_quantity) if consuming else None
            ),
            "consumed_unit": self._string(cells, "pricing_unit") if consuming else "",
            "list_cost": self._convert(cells, row, "public_on_demand_cost", parse_money),
            # CUR has no negotiated-rate cost column that means FOCUS ContractedCost.
            "contracted_cost": None,
            "billed_cost": billed,
            "effective_cost": self._effective_cost(
                cells, row, line_item_type, billed, reservation_arn
            ),
            "billing_currency": self._currency(cells, row),
            "tags": tags,
            "x_instance_type": product["instance_type"],
            "x_gpu_count": None,
            "x_gpu_model": "",
        }
        item.update(self._commitment(line_item_type, reservation_arn, savings_plan_arn))
        self._check_lengths(item, row)
        if item["charge_period_end"] < item["charge_period_start"]:
            start = self.columns["usage_start"][0]
            raise self._error(f"is before {start}", row, self.columns["usage_end"][0])
        return item

    def _currency(self, cells: Sequence[object], row: int) -> str:
        if "currency" not in self.columns:
            return self.default_currency
        currency: str = self._convert(cells, row, "currency", parse_currency)
        return currency

    def _product_fields(self, cells: Sequence[object], row: int) -> dict[str, str]:
        fields = {key: self._string(cells, key) for key in _PRODUCT_MAP_FALLBACK}
        if self.product_map is not None and not all(fields.values()):
            nested = self._product(cells, row)
            for key in _PRODUCT_MAP_FALLBACK:
                if not fields[key]:
                    fields[key] = cell_text(nested.get(COLUMNS[key].snake.removeprefix("product_")))
        return fields

    def _effective_cost(
        self,
        cells: Sequence[object],
        row: int,
        line_item_type: str,
        billed: Decimal,
        reservation_arn: str,
    ) -> Decimal:
        """AWS amortised cost: commitments spread onto the usage they cover, purchases 0."""

        def amount(key: str) -> Decimal:
            return self._needed_amount(cells, row, key, line_item_type)

        if line_item_type == "SavingsPlanCoveredUsage":
            return amount("savings_plan_effective_cost")
        if line_item_type == "DiscountedUsage":
            return amount("reservation_effective_cost")
        if line_item_type == "SavingsPlanRecurringFee":
            # The part of the hourly commitment no usage consumed.
            return amount("savings_plan_total_commitment") - amount("savings_plan_used_commitment")
        if line_item_type == "RIFee":
            return amount("reservation_unused_upfront") + amount("reservation_unused_recurring")
        if line_item_type in ("SavingsPlanNegation", "SavingsPlanUpfrontFee"):
            return ZERO
        if line_item_type == "Fee" and reservation_arn:
            # An RI upfront payment: amortised onto DiscountedUsage already.
            return ZERO
        return billed

    @staticmethod
    def _commitment(
        line_item_type: str, reservation_arn: str, savings_plan_arn: str
    ) -> dict[str, str]:
        # FOCUS: no CommitmentDiscountId, no status or type (koku's synthetic rows lack ARNs).
        status = ""
        if line_item_type in _COMMITMENT_USED:
            status = "Used"
        elif line_item_type in _COMMITMENT_UNUSED:
            status = "Unused"
        if savings_plan_arn and line_item_type.startswith("SavingsPlan"):
            return {
                "commitment_discount_id": savings_plan_arn,
                "commitment_discount_status": status,
                "commitment_discount_type": "Savings Plan",
            }
        if reservation_arn:
            return {
                "commitment_discount_id": reservation_arn,
                "commitment_discount_status": status,
                "commitment_discount_type": "Reserved Instance",
            }
        if savings_plan_arn:
            return {
                "commitment_discount_id": savings_plan_arn,
                "commitment_discount_status": status,
                "commitment_discount_type": "Savings Plan",
            }
        return {
            "commitment_discount_id": "",
            "commitment_discount_status": "",
            "commitment_discount_type": "",
        }

    def _tags(self, cells: Sequence[object], row: int) -> dict[str, str]:
        tags: dict[str, str] = {}

        def add(key: str, value: object) -> None:
            text = cell_text(value)
            if not key or not text:
                return
            tags[key] = text
            tags.setdefault(_strip_user_prefix(key), text)

        if self.tag_map is not None:
            try:
                mapped = parse_json_object(cells[self.tag_map[1]])
            except BadValue as exc:
                raise self._error(str(exc), row, self.tag_map[0]) from None
            for key, value in mapped.items():
                add(str(key), value)
        for key, position in self.tag_columns:
            add(key, cells[position])
        return tags

    def _check_lengths(self, item: dict[str, Any], row: int) -> None:
        for field in _LIMITED_FIELDS:
            value = item[field]
            limit = column_max_length(field)
            if len(value) > limit:
                raise ImportFormatError(
                    f"{field} value is longer than {limit} characters",
                    file=self.file_label,
                    row=row,
                )


class _CurTableBuilder:
    """_CurRowBuilder.build() for a whole chunk of CSV text columns at once: the same mapping,
    done per column (pyarrow) or once per distinct combination of the cells it depends on,
    through the row builder's own helpers. Raises FallBack rather than any error."""

    def __init__(self, rows: _CurRowBuilder) -> None:
        self.rows = rows

    def build(self, columns: Sequence[Any]) -> LineItemTable:
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = self.rows
        length = len(columns[0])

        def raw(key: str) -> Any:
            hit = rows.columns.get(key)
            return constant_column("sku_id", "", length) if hit is None else columns[hit[1]]

        def text(key: str) -> Any:
            return map_unique([raw(key)], cell_text, pa.string())

        def timestamps(key: str) -> Any:
            if key not in rows.columns:
                return pa.nulls(length, arrow_type("billing_period_end"))
            return map_unique([raw(key)], parse_timestamp, arrow_type("billing_period_end"))

        def money(key: str) -> Any:
            if key not in rows.columns:
                return pa.nulls(length, arrow_type("billed_cost"))
            return decimal_column(raw(key), parse_money, arrow_type("billed_cost"))

        line_item_type = text("line_item_type")
        required_filled(line_item_type)
        billing_period_start = timestamps("billing_period_start")
        required_filled(billing_period_start)
        billed = money("unblended_cost")
        required_filled(billed)
        charge_period_start = timestamps("usage_start")
        required_filled(charge_period_start)
        charge_period_end = timestamps("usage_end")
        required_filled(charge_period_end)
        if pc.any(pc.less(charge_period_end, charge_period_start)).as_py():
            raise FallBack("a charge period ends before it starts")

        usage_type = text("usage_type")
        reservation_arn = text("reservation_arn")
        savings_plan_arn = text("savings_plan_arn")
        categories = map_unique([line_item_type], charge_category, pa.string())
        pricing = map_unique(
            [line_item_type, usage_type],
            lambda kind, usage: pricing_category(kind, charge_category(kind), usage),
            pa.string(),
        )
        commitment, commitment_index = unique_results(
            [line_item_type, reservation_arn, savings_plan_arn], _CurRowBuilder._commitment
        )
        tags, tags_index = self._tags(columns, length)
        product = self._product(columns, length)
        consuming = pc.is_in(line_item_type, value_set=pa.array(sorted(_CONSUMING)))
        if "usage_amount" in rows.columns:
            quantity = decimal_column(
                raw("usage_amount"), parse_quantity, arrow_type("consumed_quantity")
            )
            quantity = pc.if_else(consuming, quantity, None)
        else:
            quantity = pa.nulls(length, arrow_type("consumed_quantity"))
        empty = constant_column("sku_id", "", length)

        def commitment_field(name: str) -> Any:
            values = pa.array([found[name] for found in commitment], type=pa.string())
            return values.take(commitment_index)

        out: dict[str, Any] = {
            "billing_period": map_unique([raw("billing_period_start")], _period_of, pa.date32()),
            "billing_period_start": billing_period_start,
            "billing_period_end": timestamps("billing_period_end"),
            "provider_name": constant_column("provider_name", "AWS", length),
            "billing_account_id": text("payer_account"),
            "sub_account_id": text("usage_account"),
            "charge_period_start": charge_period_start,
            "charge_period_end": charge_period_end,
            "charge_category": categories,
            "pricing_category": pricing,
            "service_category": empty,
            "service_name": _or(product["product_name"], text("product_code")),
            "sku_id": product["sku"],
            "region_id": _or(product["region_code"], product["region"]),
            "resource_id": text("resource_id"),
            "resource_name": pa.array(
                [found.get("Name") or found.get("name") or "" for found in tags],
                type=pa.string(),
            ).take(tags_index),
            "resource_type": empty,
            "consumed_quantity": quantity,
            "consumed_unit": pc.if_else(consuming, text("pricing_unit"), ""),
            "list_cost": money("public_on_demand_cost"),
            "contracted_cost": pa.nulls(length, arrow_type("contracted_cost")),
            "billed_cost": billed,
            "effective_cost": self._effective_cost(line_item_type, billed, reservation_arn, money),
            "billing_currency": (
                map_unique([raw("currency")], parse_currency, pa.string())
                if "currency" in rows.columns
                else constant_column("billing_currency", rows.default_currency, length)
            ),
            "tags": pa.array([json.dumps(found) for found in tags], type=pa.string()).take(
                tags_index
            ),
            "x_instance_type": product["instance_type"],
            "x_gpu_count": pa.nulls(length, arrow_type("x_gpu_count")),
            "x_gpu_model": empty,
            "commitment_discount_id": commitment_field("commitment_discount_id"),
            "commitment_discount_status": commitment_field("commitment_discount_status"),
            "commitment_discount_type": commitment_field("commitment_discount_type"),
        }
        for field in _LIMITED_FIELDS:
            within_length(out[field], column_max_length(field))
        return LineItemTable(pa.table(out))

    def _tags(self, columns: Sequence[Any], length: int) -> tuple[list[dict[str, str]], Any]:
        import pyarrow as pa

        rows = self.rows
        sources = []
        if rows.tag_map is not None:
            sources.append(columns[rows.tag_map[1]])
        sources.extend(columns[position] for _, position in rows.tag_columns)
        if not sources:
            return [{}], pa.array([0] * length, type=pa.int32())
        # _CurRowBuilder._tags reads cells by header position: hand it a sparse row.
        positions = ([rows.tag_map[1]] if rows.tag_map is not None else []) + [
            position for _, position in rows.tag_columns
        ]

        def build(*cells: str) -> dict[str, str]:
            row: dict[int, str] = dict(zip(positions, cells, strict=True))
            try:
                return rows._tags(row, 0)  # type: ignore[arg-type]
            except ImportFormatError:
                raise FallBack("bad tags") from None

        return unique_results(sources, build)

    def _product(self, columns: Sequence[Any], length: int) -> dict[str, Any]:
        import pyarrow as pa

        rows = self.rows
        positions = [rows.columns[key][1] for key in _PRODUCT_MAP_FALLBACK if key in rows.columns]
        if rows.product_map is not None:
            positions.append(rows.product_map[1])
        if not positions:
            empty = constant_column("sku_id", "", length)
            return dict.fromkeys(_PRODUCT_MAP_FALLBACK, empty)

        def build(*cells: str) -> tuple[str, ...]:
            row: dict[int, str] = dict(zip(positions, cells, strict=True))
            try:
                fields = rows._product_fields(_SparseRow(row), 0)  # type: ignore[arg-type]
            except ImportFormatError:
                raise FallBack("bad product map") from None
            return tuple(fields[key] for key in _PRODUCT_MAP_FALLBACK)

        results, index = unique_results([columns[p] for p in positions], build)
        return {
            key: pa.array([found[k] for found in results], type=pa.string()).take(index)
            for k, key in enumerate(_PRODUCT_MAP_FALLBACK)
        }

    def _effective_cost(
        self, line_item_type: Any, billed: Any, reservation_arn: Any, money: Any
    ) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = self.rows
        money_type = arrow_type("effective_cost")
        present = set(pc.unique(line_item_type).to_pylist())
        zero = pa.scalar(ZERO, type=money_type)

        def amount(key: str) -> Any:
            if key not in rows.columns:
                raise FallBack(f"missing {key}")  # the per-row path names the row
            return pc.fill_null(money(key), zero)

        def is_type(kind: str) -> Any:
            return pc.equal(line_item_type, kind)

        def fit(values: Any) -> Any:
            try:
                return pc.cast(values, money_type, safe=True)
            except pa.ArrowInvalid:
                raise FallBack("effective cost out of range") from None

        effective = billed
        if "SavingsPlanCoveredUsage" in present:
            covered = amount("savings_plan_effective_cost")
            effective = pc.if_else(is_type("SavingsPlanCoveredUsage"), covered, effective)
        if "DiscountedUsage" in present:
            discounted = amount("reservation_effective_cost")
            effective = pc.if_else(is_type("DiscountedUsage"), discounted, effective)
        if "SavingsPlanRecurringFee" in present:
            unused = fit(
                pc.subtract(
                    amount("savings_plan_total_commitment"),
                    amount("savings_plan_used_commitment"),
                )
            )
            effective = pc.if_else(is_type("SavingsPlanRecurringFee"), unused, effective)
        if "RIFee" in present:
            unused = fit(
                pc.add(amount("reservation_unused_upfront"), amount("reservation_unused_recurring"))
            )
            effective = pc.if_else(is_type("RIFee"), unused, effective)
        nothing = pc.or_(
            pc.is_in(
                line_item_type,
                value_set=pa.array(["SavingsPlanNegation", "SavingsPlanUpfrontFee"]),
            ),
            pc.and_(is_type("Fee"), pc.not_equal(reservation_arn, "")),
        )
        return pc.if_else(nothing, zero, effective)


class _SparseRow(dict[int, str]):
    """Cells by header position for the row builder's helpers; unread positions are blank."""

    def __missing__(self, position: int) -> str:
        return ""


def _or(first: Any, second: Any) -> Any:
    """first, or second where first is empty (the row builder's ``a or b`` on text)."""
    import pyarrow.compute as pc

    return pc.if_else(pc.equal(first, ""), second, first)


def _period_of(value: object) -> date:
    start = parse_timestamp(value)
    if start is None:
        raise BadValue("empty")
    return date(start.year, start.month, 1)


_LIMITED_FIELDS = (
    "billing_account_id",
    "sub_account_id",
    "service_name",
    "sku_id",
    "region_id",
    "resource_id",
    "resource_name",
    "commitment_discount_id",
    "consumed_unit",
    "x_instance_type",
)


# --------------------------------------------------------------------------- readers


def _open_zip_member(path: Path, *, file_label: str) -> CappedText:
    """Legacy CUR can be delivered zipped: one CSV inside, streamed (never extracted whole)."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ImportFormatError(f"cannot read zip ({exc})", file=file_label) from None
    members = [info for info in archive.infolist() if not info.is_dir()]
    if len(members) != 1:
        archive.close()
        raise ImportFormatError(
            f"zip holds {len(members)} files; expected one CUR CSV", file=file_label
        )
    binary = archive.open(members[0])
    text = io.TextIOWrapper(binary, encoding="utf-8-sig", errors="surrogateescape", newline="")
    return CappedText(text, file_label=file_label)


def _parse_csv(path: Path, *, file_label: str, kind: str, chunk_size: int) -> LineItemChunks:
    if kind == "zip":
        handle = _open_zip_member(path, file_label=file_label)
    else:
        handle = open_text(path, compressed=kind == "gzip", file_label=file_label)
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise ImportFormatError("file is empty (no header row)", file=file_label) from None
        except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error) as exc:
            raise ImportFormatError(
                f"cannot read the header row ({exc})", file=file_label, row=1
            ) from None
        check_cells(header, file_label=file_label, row=1)
        try:
            builder = _CurRowBuilder(header, file_label=file_label)
        except ImportFormatError as exc:
            raise exc.with_row(1) from None  # the header is row 1 of a CSV
        delivered = 0
        if kind != "zip":
            try:
                batches = arrow_csv_batches(path, header, compressed=kind == "gzip")
                for columns in arrow_chunks(batches, chunk_size):
                    table = _CurTableBuilder(builder).build(columns)
                    delivered += len(table)
                    # A Sequence of the same dicts (see LineItemTable); the service COPYs it whole.
                    yield cast(list[dict[str, Any]], table)
                if delivered:
                    return
            except FallBack:
                pass  # the per-row path below takes over after the rows already delivered
        rows = skip_rows(csv_rows(reader, file_label=file_label, header=header), delivered)
        seen = delivered > 0
        for chunk in built_chunks(rows, builder.build, chunk_size=chunk_size):
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
    builder = _CurRowBuilder(header, file_label=file_label)
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


@register_billing_parser("aws-cur", database_free=True)
def parse_aws_cur(path: Path, *, file_label: str, chunk_size: int = CHUNK_ROWS) -> LineItemChunks:
    """Chunks of CostLineItem field dicts from an AWS CUR 2.0 or legacy CUR file."""
    magic = read_magic(path)
    if magic == PARQUET_MAGIC or path.suffix.lower() == ".parquet":
        return _parse_parquet(path, file_label=file_label, chunk_size=chunk_size)
    if magic == _ZIP_MAGIC:
        kind = "zip"
    elif magic[:2] == GZIP_MAGIC:
        kind = "gzip"
    else:
        kind = "plain"
    return _parse_csv(path, file_label=file_label, kind=kind, chunk_size=chunk_size)
