"""A chunk of CUR CSV text columns -> CostLineItem fields at once (pyarrow): CurTableBuilder, the
columnar twin of CurRowBuilder.build(), falling back to it (FallBack) rather than raising."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from typing import Any

from billing_ingest.parsers.aws_cur.columns import (
    CONSUMING,
    LIMITED_FIELDS,
    PRODUCT_MAP_FALLBACK,
    ZERO,
    charge_category,
    pricing_category,
)
from billing_ingest.parsers.aws_cur.row import CurRowBuilder
from billing_ingest.parsers.columnar import (
    FallBack,
    LineItemTable,
    arrow_type,
    constant_column,
    decimal_column,
    map_unique,
    required_filled,
    unique_results,
    within_length,
)
from billing_ingest.parsers.values import (
    BadValue,
    cell_text,
    column_max_length,
    parse_currency,
    parse_money,
    parse_quantity,
    parse_timestamp,
)
from finops.core.errors import ImportFormatError


class CurTableBuilder:
    """CurRowBuilder.build() for a whole chunk of CSV text columns at once: the same mapping,
    done per column (pyarrow) or once per distinct combination of the cells it depends on,
    through the row builder's own helpers. Raises FallBack rather than any error."""

    def __init__(self, rows: CurRowBuilder) -> None:
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
        invoiced = money("unblended_cost")
        required_filled(invoiced)
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
            [line_item_type, reservation_arn, savings_plan_arn], CurRowBuilder._commitment
        )
        tags, tags_index = self._tags(columns, length)
        product = self._product(columns, length)
        consuming = pc.is_in(line_item_type, value_set=pa.array(sorted(CONSUMING)))
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
            "billing_account_name": text("payer_account_name"),
            "sub_account_name": text("usage_account_name"),
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
            "billed_cost": invoiced,
            "effective_cost": self._effective_cost(
                line_item_type, invoiced, reservation_arn, money
            ),
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
        for field in LIMITED_FIELDS:
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
        # CurRowBuilder._tags reads cells by header position: hand it a sparse row.
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
        positions = [rows.columns[key][1] for key in PRODUCT_MAP_FALLBACK if key in rows.columns]
        if rows.product_map is not None:
            positions.append(rows.product_map[1])
        if not positions:
            empty = constant_column("sku_id", "", length)
            return dict.fromkeys(PRODUCT_MAP_FALLBACK, empty)

        def build(*cells: str) -> tuple[str, ...]:
            row: dict[int, str] = dict(zip(positions, cells, strict=True))
            try:
                fields = rows._product_fields(_SparseRow(row), 0)  # type: ignore[arg-type]
            except ImportFormatError:
                raise FallBack("bad product map") from None
            return tuple(fields[key] for key in PRODUCT_MAP_FALLBACK)

        results, index = unique_results([columns[p] for p in positions], build)
        return {
            key: pa.array([found[k] for found in results], type=pa.string()).take(index)
            for k, key in enumerate(PRODUCT_MAP_FALLBACK)
        }

    def _effective_cost(
        self, line_item_type: Any, invoiced: Any, reservation_arn: Any, money: Any
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

        effective = invoiced
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
