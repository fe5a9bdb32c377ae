"""One CUR row (CSV text or Parquet values) -> CostLineItem fields: CurRowBuilder, whose plan
(which column is where, which flavour) is made once from the header."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings

from billing_ingest.parsers.aws_cur.columns import (
    COLUMNS,
    COMMITMENT_UNUSED,
    COMMITMENT_USED,
    CONSUMING,
    CUR2,
    LEGACY,
    LIMITED_FIELDS,
    PRODUCT_MAP_FALLBACK,
    REQUIRED,
    ZERO,
    charge_category,
    pricing_category,
    squash,
    strip_user_prefix,
)
from billing_ingest.parsers.checks import check_unique_columns, missing_columns_error
from billing_ingest.parsers.rows import LineItemRow, row_text
from billing_ingest.parsers.values import (
    BadValue,
    cell_text,
    column_max_length,
    parse_currency,
    parse_json_object,
    parse_money,
    parse_quantity,
    parse_timestamp,
)
from finops.core.errors import ImportFormatError


class CurRowBuilder:
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
                squashed.setdefault(squash(name), (name, position))
        self.columns: dict[str, tuple[str, int]] = {}
        for key, column in COLUMNS.items():
            hit = squashed.get(squash(column.snake))
            if hit is not None:
                self.columns[key] = hit
        missing = [key for key in REQUIRED if key not in self.columns]
        if missing:
            names = [COLUMNS[key].name(self.flavour) for key in missing]
            raise missing_columns_error("AWS CUR", names, file_label=file_label)
        mapped = [position for _, position in self.columns.values()]
        check_unique_columns(header, mapped, file_label=file_label, key=squash)
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

    def build(self, cells: Sequence[object], row: int) -> LineItemRow:
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
        invoiced: Decimal = self._required(cells, row, "unblended_cost", parse_money)
        category = charge_category(line_item_type)
        usage_type = self._string(cells, "usage_type")
        reservation_arn = self._string(cells, "reservation_arn")
        savings_plan_arn = self._string(cells, "savings_plan_arn")
        tags = self._tags(cells, row)
        product = self._product_fields(cells, row)
        consuming = line_item_type in CONSUMING
        item: LineItemRow = {
            "billing_period": date(billing_period_start.year, billing_period_start.month, 1),
            "billing_period_start": billing_period_start,
            "billing_period_end": self._convert(cells, row, "billing_period_end", parse_timestamp),
            "provider_name": "AWS",
            "billing_account_id": self._string(cells, "payer_account"),
            "sub_account_id": self._string(cells, "usage_account"),
            "billing_account_name": self._string(cells, "payer_account_name"),
            "sub_account_name": self._string(cells, "usage_account_name"),
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
            "billed_cost": invoiced,
            "effective_cost": self._effective_cost(
                cells, row, line_item_type, invoiced, reservation_arn
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
        fields = {key: self._string(cells, key) for key in PRODUCT_MAP_FALLBACK}
        if self.product_map is not None and not all(fields.values()):
            nested = self._product(cells, row)
            for key in PRODUCT_MAP_FALLBACK:
                if not fields[key]:
                    fields[key] = cell_text(nested.get(COLUMNS[key].snake.removeprefix("product_")))
        return fields

    def _effective_cost(
        self,
        cells: Sequence[object],
        row: int,
        line_item_type: str,
        invoiced: Decimal,
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
        return invoiced

    @staticmethod
    def _commitment(
        line_item_type: str, reservation_arn: str, savings_plan_arn: str
    ) -> LineItemRow:
        # FOCUS: no CommitmentDiscountId, no status or type (koku's synthetic rows lack ARNs).
        status = ""
        if line_item_type in COMMITMENT_USED:
            status = "Used"
        elif line_item_type in COMMITMENT_UNUSED:
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
            tags.setdefault(strip_user_prefix(key), text)

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

    def _check_lengths(self, item: LineItemRow, row: int) -> None:
        for field in LIMITED_FIELDS:
            value = row_text(item, field)
            limit = column_max_length(field)
            if len(value) > limit:
                raise ImportFormatError(
                    f"{field} value is longer than {limit} characters",
                    file=self.file_label,
                    row=row,
                )
