"""The aws-cur billing parser on hand-made CUR 2.0 and legacy CUR rows (real AWS column names):
ChargeCategory / PricingCategory / amortised EffectiveCost for every line item type, tags,
gzip / zip / Parquet, flavour detection from the header, and error messages."""

from __future__ import annotations

import csv
import gzip
import io
import json
import zipfile
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from billing_ingest.parsers import billing_parser
from billing_ingest.parsers.aws_cur import parse_aws_cur
from billing_ingest.parsers.rows import LineItemRow
from finops.core.errors import ImportFormatError
from finops.core.money import MONEY_QUANTUM
from tests.builders import CUR2_COLUMNS, RI_ARN, SP_ARN, cur2_row, legacy_row


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    columns = columns or list(rows[0])
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def parse(path: Path, **kwargs: Any) -> list[LineItemRow]:
    return [item for chunk in parse_aws_cur(path, file_label=path.name, **kwargs) for item in chunk]


def parse_one(tmp_path: Path, **overrides: str) -> LineItemRow:
    (item,) = parse(write_csv(tmp_path / "cur.csv", [cur2_row(**overrides)]))
    return item


def money(text: str) -> Decimal:
    return Decimal(text).quantize(MONEY_QUANTUM)


# --------------------------------------------------------------------------- line item types

# (line item type, overrides, ChargeCategory, PricingCategory, commitment status,
#  expected EffectiveCost as a function of the row: AWS's amortisation rule for the type)
LINE_ITEM_TYPES = [
    ("Usage", {}, "Usage", "Standard", "", lambda r: money(r["line_item_unblended_cost"])),
    (
        "DiscountedUsage",
        {
            "line_item_unblended_cost": "0",
            "reservation_reservation_a_r_n": RI_ARN,
            "reservation_effective_cost": "20.51",
        },
        "Usage",
        "Committed",
        "Used",
        lambda r: money(r["reservation_effective_cost"]),
    ),
    (
        "SavingsPlanCoveredUsage",
        {
            "savings_plan_savings_plan_a_r_n": SP_ARN,
            "savings_plan_savings_plan_effective_cost": "21.3022",
        },
        "Usage",
        "Committed",
        "Used",
        lambda r: money(r["savings_plan_savings_plan_effective_cost"]),
    ),
    (
        "SavingsPlanNegation",
        {"line_item_unblended_cost": "-32.7726", "savings_plan_savings_plan_a_r_n": SP_ARN},
        "Usage",
        "Committed",
        "Used",
        lambda r: money("0"),
    ),
    (
        "SavingsPlanRecurringFee",
        {
            "line_item_unblended_cost": "720",
            "line_item_resource_id": SP_ARN,
            "savings_plan_savings_plan_a_r_n": SP_ARN,
            "savings_plan_total_commitment_to_date": "720",
            "savings_plan_used_commitment": "699.125",
        },
        "Purchase",
        "Committed",
        "Unused",
        lambda r: (
            money(r["savings_plan_total_commitment_to_date"])
            - money(r["savings_plan_used_commitment"])
        ),
    ),
    (
        "SavingsPlanUpfrontFee",
        {"line_item_unblended_cost": "10000", "savings_plan_savings_plan_a_r_n": SP_ARN},
        "Purchase",
        "Standard",
        "",
        lambda r: money("0"),
    ),
    (
        "RIFee",
        {
            "line_item_unblended_cost": "500",
            "reservation_reservation_a_r_n": RI_ARN,
            "reservation_unused_amortized_upfront_fee_for_billing_period": "12.5",
            "reservation_unused_recurring_fee": "7.25",
        },
        "Purchase",
        "Committed",
        "Unused",
        lambda r: (
            money(r["reservation_unused_amortized_upfront_fee_for_billing_period"])
            + money(r["reservation_unused_recurring_fee"])
        ),
    ),
    (
        "Fee",
        {"line_item_unblended_cost": "8760", "reservation_reservation_a_r_n": RI_ARN},
        "Purchase",
        "Standard",
        "",
        lambda r: money("0"),
    ),
    (
        "Fee",
        {"line_item_unblended_cost": "100", "line_item_product_code": "AWSSupportBusiness"},
        "Purchase",
        "Standard",
        "",
        lambda r: money(r["line_item_unblended_cost"]),
    ),
    ("Tax", {"line_item_unblended_cost": "5.5"}, "Tax", "", "", lambda r: money("5.5")),
    ("Credit", {"line_item_unblended_cost": "-10"}, "Credit", "", "", lambda r: money("-10")),
    ("Refund", {"line_item_unblended_cost": "-3"}, "Credit", "", "", lambda r: money("-3")),
    (
        "BundledDiscount",
        {"line_item_unblended_cost": "-1.25"},
        "Credit",
        "",
        "",
        lambda r: money("-1.25"),
    ),
    ("EdpDiscount", {"line_item_unblended_cost": "-2"}, "Credit", "", "", lambda r: money("-2")),
    (
        "SomeFutureType",
        {"line_item_unblended_cost": "4"},
        "Adjustment",
        "",
        "",
        lambda r: money("4"),
    ),
]


@pytest.mark.parametrize(
    ("line_item_type", "overrides", "category", "pricing", "status", "effective"),
    LINE_ITEM_TYPES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(LINE_ITEM_TYPES)],
)
def test_line_item_type_mapping_and_amortisation(
    tmp_path: Path,
    line_item_type: str,
    overrides: dict[str, str],
    category: str,
    pricing: str,
    status: str,
    effective: Callable[[dict[str, str]], Decimal],
) -> None:
    row = cur2_row(line_item_line_item_type=line_item_type, **overrides)
    (item,) = parse(write_csv(tmp_path / "cur.csv", [row]))

    assert item["charge_category"] == category
    assert item["pricing_category"] == pricing
    assert item["billed_cost"] == money(row["line_item_unblended_cost"])
    assert item["effective_cost"] == effective(row)
    assert item["commitment_discount_status"] == status
    arn = row["savings_plan_savings_plan_a_r_n"] or row["reservation_reservation_a_r_n"]
    assert item["commitment_discount_id"] == arn


def test_all_types_in_one_file_sum_to_their_amortised_total(tmp_path: Path) -> None:
    rows = [
        cur2_row(line_item_line_item_type=kind, identity_line_item_id=f"li-{i}", **overrides)
        for i, (kind, overrides, *_rest) in enumerate(LINE_ITEM_TYPES)
    ]
    items = parse(write_csv(tmp_path / "cur.csv", rows))

    assert len(items) == len(rows)
    assert sum(i["billed_cost"] for i in items) == sum(
        money(r["line_item_unblended_cost"]) for r in rows
    )
    expected_effective = sum(case[5](row) for case, row in zip(LINE_ITEM_TYPES, rows, strict=True))
    assert sum(i["effective_cost"] for i in items) == expected_effective


def test_commitment_types(tmp_path: Path) -> None:
    ri = parse_one(
        tmp_path,
        line_item_line_item_type="DiscountedUsage",
        reservation_reservation_a_r_n=RI_ARN,
        reservation_effective_cost="1",
    )
    sp = parse_one(
        tmp_path,
        line_item_line_item_type="SavingsPlanCoveredUsage",
        savings_plan_savings_plan_a_r_n=SP_ARN,
        savings_plan_savings_plan_effective_cost="1",
    )
    assert (ri["commitment_discount_type"], sp["commitment_discount_type"]) == (
        "Reserved Instance",
        "Savings Plan",
    )


def test_spot_usage_is_dynamic(tmp_path: Path) -> None:
    item = parse_one(tmp_path, line_item_usage_type="USE1-SpotUsage:p4d.24xlarge")
    assert item["pricing_category"] == "Dynamic"
    assert item["charge_category"] == "Usage"


def test_consumed_quantity_only_on_consuming_rows(tmp_path: Path) -> None:
    usage = parse_one(tmp_path, line_item_usage_amount="2.5")
    negation = parse_one(
        tmp_path,
        line_item_line_item_type="SavingsPlanNegation",
        line_item_usage_amount="2.5",
        savings_plan_savings_plan_a_r_n=SP_ARN,
    )
    assert (usage["consumed_quantity"], usage["consumed_unit"]) == (Decimal("2.5"), "Hrs")
    assert (negation["consumed_quantity"], negation["consumed_unit"]) == (None, "")


# --------------------------------------------------------------------------- FOCUS columns


def test_focus_columns_from_a_cur2_row(tmp_path: Path) -> None:
    row = cur2_row(
        bill_billing_period_start_date="2024-10-01T00:00:00.000Z",
        bill_billing_period_end_date="2024-11-01T00:00:00.000Z",
        # A late September charge on the October invoice belongs to October.
        line_item_usage_start_date="2024-09-30T23:00:00.000Z",
        line_item_usage_end_date="2024-10-01T00:00:00.000Z",
        pricing_public_on_demand_cost="40.96",
    )
    (item,) = parse(write_csv(tmp_path / "cur.csv", [row]))

    assert item["billing_period"] == date(2024, 10, 1)
    assert item["billing_period_start"] == datetime(2024, 10, 1, tzinfo=UTC)
    assert item["billing_period_end"] == datetime(2024, 11, 1, tzinfo=UTC)
    assert item["charge_period_start"] == datetime(2024, 9, 30, 23, tzinfo=UTC)
    assert item["charge_period_end"] == datetime(2024, 10, 1, tzinfo=UTC)
    assert item["provider_name"] == "AWS"
    assert item["billing_account_id"] == "111122223333"
    assert item["sub_account_id"] == "444455556666"
    assert item["service_name"] == "Amazon Elastic Compute Cloud"  # from the product map
    assert item["sku_id"] == "SKU-P4D"
    assert item["region_id"] == "us-east-1"
    assert item["resource_id"] == "i-0abc"
    assert item["x_instance_type"] == "p4d.24xlarge"
    assert item["list_cost"] == money("40.96")
    assert item["billing_currency"] == "USD"


def test_service_name_falls_back_to_product_code(tmp_path: Path) -> None:
    item = parse_one(tmp_path, product="{}", line_item_product_code="AmazonSageMaker")
    assert item["service_name"] == "AmazonSageMaker"


def test_product_map_supplies_nested_attributes(tmp_path: Path) -> None:
    # CUR 2.0 nests most product attributes: product['instance_type'], product['region_code'].
    product = {
        "product_name": "Amazon EC2",
        "instance_type": "g5.xlarge",
        "region_code": "eu-west-1",
    }
    item = parse_one(
        tmp_path, product=json.dumps(product), product_instance_type="", product_region_code=""
    )
    assert (item["x_instance_type"], item["region_id"]) == ("g5.xlarge", "eu-west-1")


# --------------------------------------------------------------------------- tags


def test_cur2_resource_tags_keep_original_and_add_stripped_keys(tmp_path: Path) -> None:
    tags = {"user_team": "vision", "user_Name": "gpu-node-1", "aws_created_by": "IAMUser:x"}
    item = parse_one(tmp_path, resource_tags=json.dumps(tags))

    assert item["tags"] == {
        "user_team": "vision",
        "team": "vision",
        "user_Name": "gpu-node-1",
        "Name": "gpu-node-1",
        "aws_created_by": "IAMUser:x",
    }
    assert item["resource_name"] == "gpu-node-1"


def test_flattened_snake_tag_columns(tmp_path: Path) -> None:
    columns = [*CUR2_COLUMNS, "resource_tags_user_team", "resource_tags_user_project"]
    columns.remove("resource_tags")
    row = cur2_row(resource_tags_user_team="speech", resource_tags_user_project="")
    (item,) = parse(write_csv(tmp_path / "cur.csv", [row], columns))
    # An empty tag cell means "not tagged".
    assert item["tags"] == {"user_team": "speech", "team": "speech"}


def test_empty_resource_tags_is_no_tags(tmp_path: Path) -> None:
    assert parse_one(tmp_path, resource_tags="")["tags"] == {}


# --------------------------------------------------------------------------- legacy CUR


def test_legacy_header_is_detected_and_maps_like_cur2(tmp_path: Path) -> None:
    overrides = {
        "line_item_line_item_type": "SavingsPlanCoveredUsage",
        "savings_plan_savings_plan_a_r_n": SP_ARN,
        "savings_plan_savings_plan_effective_cost": "21.3022",
    }
    (legacy,) = parse(write_csv(tmp_path / "legacy.csv", [legacy_row(**overrides)]))
    (cur2,) = parse(write_csv(tmp_path / "cur2.csv", [cur2_row(**overrides)]))

    assert legacy["tags"] == {
        "user:team": "vision",
        "team": "vision",
        "user:Name": "gpu-node-1",
        "Name": "gpu-node-1",
        "aws:createdBy": "IAMUser:x",
    }
    assert legacy["resource_name"] == "gpu-node-1"
    # Every field at once, by name: read both rows as plain mappings.
    legacy_fields, cur2_fields = cast(dict[str, Any], legacy), cast(dict[str, Any], cur2)
    different = {
        k
        for k in cur2_fields
        if k not in ("tags", "resource_name") and legacy_fields[k] != cur2_fields[k]
    }
    assert different == set()


def test_legacy_arn_column_spelled_arn_lowercase(tmp_path: Path) -> None:
    # koku's files spell it savingsPlan/SavingsPlanArn.
    row = legacy_row(line_item_line_item_type="SavingsPlanNegation")
    row["savingsPlan/SavingsPlanArn"] = row.pop("savingsPlan/SavingsPlanARN") or SP_ARN
    (item,) = parse(write_csv(tmp_path / "legacy.csv", [row]))
    assert item["commitment_discount_id"] == SP_ARN


def test_legacy_missing_column_is_named_in_legacy_spelling(tmp_path: Path) -> None:
    row = legacy_row()
    del row["lineItem/UnblendedCost"]
    with pytest.raises(ImportFormatError) as info:
        parse(write_csv(tmp_path / "legacy.csv", [row]))
    assert info.value.column == "lineItem/UnblendedCost"
    assert "lineItem/UnblendedCost" in str(info.value)


def test_legacy_short_row_is_padded_with_empty_cells(tmp_path: Path) -> None:
    # koku's sample rows omit the trailing costCategory column of the header.
    row = legacy_row()
    path = write_csv(tmp_path / "legacy.csv", [row], [*row, "costCategory/CostCenter"])
    text = path.read_text().rstrip("\n")
    header, data = text.split("\n")
    path.write_text(f"{header}\n{data.removesuffix(',')}\n")
    (item,) = parse(path)
    assert item["billed_cost"] == money(row["lineItem/UnblendedCost"])


# --------------------------------------------------------------------------- containers


def test_gzip_and_chunks(tmp_path: Path) -> None:
    rows = [
        cur2_row(identity_line_item_id=f"li-{i}", line_item_resource_id=f"i-{i}") for i in range(5)
    ]
    plain = write_csv(tmp_path / "cur.csv", rows)
    packed = tmp_path / "export-00001.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))

    chunks = list(parse_aws_cur(packed, file_label=packed.name, chunk_size=2))

    assert [len(chunk) for chunk in chunks] == [2, 2, 1]
    assert [item for chunk in chunks for item in chunk] == parse(plain)


def test_gzip_detected_by_magic_bytes_not_name(tmp_path: Path) -> None:
    plain = write_csv(tmp_path / "cur.csv", [cur2_row()])
    packed = tmp_path / "cur-data"  # no suffix
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert parse(packed) == parse(plain)


def test_zipped_legacy_csv(tmp_path: Path) -> None:
    plain = write_csv(tmp_path / "legacy.csv", [legacy_row()])
    packed = tmp_path / "report-1.csv.zip"
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(plain, "report-1.csv")
    assert parse(packed) == parse(plain)


def _cur2_parquet(path: Path, rows: list[dict[str, str]]) -> Path:
    """CUR 2.0 Parquet as Data Exports writes it: timestamps, doubles, map<string,string>."""
    as_map = pa.map_(pa.string(), pa.string())
    timestamp = pa.timestamp("ms")
    timestamps = {
        "bill_billing_period_start_date",
        "bill_billing_period_end_date",
        "line_item_usage_start_date",
        "line_item_usage_end_date",
    }
    doubles = {
        "line_item_usage_amount",
        "line_item_unblended_cost",
        "pricing_public_on_demand_cost",
        "reservation_effective_cost",
        "reservation_unused_amortized_upfront_fee_for_billing_period",
        "reservation_unused_recurring_fee",
        "savings_plan_savings_plan_effective_cost",
        "savings_plan_total_commitment_to_date",
        "savings_plan_used_commitment",
    }
    arrays = {}
    for name in CUR2_COLUMNS:
        values = [row[name] for row in rows]
        if name in timestamps:
            parsed = [datetime.fromisoformat(v).replace(tzinfo=None) for v in values]
            arrays[name] = pa.array(parsed, type=timestamp)
        elif name in doubles:
            arrays[name] = pa.array([float(v) if v else None for v in values], type=pa.float64())
        elif name in ("product", "resource_tags"):
            maps = [list(json.loads(v).items()) if v else None for v in values]
            arrays[name] = pa.array(maps, type=as_map)
        else:
            arrays[name] = pa.array(values, type=pa.string())
    pq.write_table(pa.table(arrays), path, row_group_size=2)
    return path


def test_parquet_cur2_matches_csv(tmp_path: Path) -> None:
    rows = [
        cur2_row(line_item_line_item_type=kind, identity_line_item_id=f"li-{i}", **overrides)
        for i, (kind, overrides, *_rest) in enumerate(LINE_ITEM_TYPES)
    ]
    rows[1]["line_item_usage_type"] = "USE1-SpotUsage:g5.xlarge"
    rows[0]["resource_tags"] = json.dumps({"user_team": "vision", "user_Name": "n1"})
    path = _cur2_parquet(tmp_path / "part-00000.snappy.parquet", rows)

    chunks = list(parse_aws_cur(path, file_label=path.name, chunk_size=4))
    items = [item for chunk in chunks for item in chunk]

    assert all(len(chunk) <= 4 for chunk in chunks)
    assert items == parse(write_csv(tmp_path / "same.csv", rows))
    assert items[0]["tags"] == {
        "user_team": "vision",
        "team": "vision",
        "user_Name": "n1",
        "Name": "n1",
    }
    assert items[0]["charge_period_start"] == datetime(2024, 9, 5, 10, tzinfo=UTC)


def test_parquet_bad_value_names_record_and_column(tmp_path: Path) -> None:
    rows = [cur2_row(identity_line_item_id=f"li-{i}") for i in range(3)]
    path = _cur2_parquet(tmp_path / "cur.parquet", rows)
    table = pq.read_table(path)
    currency = pa.array(["USD", "USD", "dollars"], type=pa.string())
    index = table.schema.get_field_index("line_item_currency_code")
    pq.write_table(table.set_column(index, "line_item_currency_code", currency), path)

    with pytest.raises(ImportFormatError) as info:
        parse(path)
    assert (info.value.row, info.value.column) == (3, "line_item_currency_code")


def test_registered_as_aws_cur() -> None:
    assert billing_parser("aws-cur") is parse_aws_cur


# --------------------------------------------------------------------------- errors


def test_bad_number_names_file_row_and_column(tmp_path: Path) -> None:
    rows = [cur2_row(), cur2_row(), cur2_row(line_item_unblended_cost="12,50")]
    path = write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(ImportFormatError) as info:
        parse(path)
    # Header is row 1: the third data row is row 4.
    assert (info.value.file, info.value.row, info.value.column) == (
        "bad.csv",
        4,
        "line_item_unblended_cost",
    )
    assert str(info.value).startswith("file bad.csv, row 4, column line_item_unblended_cost:")


@pytest.mark.parametrize(
    "column",
    [
        "line_item_usage_start_date",
        "line_item_usage_end_date",
        "line_item_unblended_cost",
        "bill_billing_period_start_date",
        "line_item_line_item_type",
    ],
)
def test_missing_required_column(tmp_path: Path, column: str) -> None:
    columns = [c for c in CUR2_COLUMNS if c != column]
    with pytest.raises(ImportFormatError) as info:
        parse(write_csv(tmp_path / "cur.csv", [cur2_row()], columns))
    assert info.value.column == column
    assert column in str(info.value)


def test_missing_amortisation_column_only_fails_rows_that_need_it(tmp_path: Path) -> None:
    columns = [c for c in CUR2_COLUMNS if c != "savings_plan_savings_plan_effective_cost"]
    ok = parse(write_csv(tmp_path / "usage.csv", [cur2_row()], columns))
    assert len(ok) == 1

    rows = [cur2_row(), cur2_row(line_item_line_item_type="SavingsPlanCoveredUsage")]
    with pytest.raises(ImportFormatError) as info:
        parse(write_csv(tmp_path / "sp.csv", rows, columns))
    assert (info.value.row, info.value.column) == (3, "savings_plan_savings_plan_effective_cost")


def test_empty_required_cell(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError) as info:
        parse(write_csv(tmp_path / "cur.csv", [cur2_row(line_item_usage_end_date="")]))
    assert (info.value.row, info.value.column) == (2, "line_item_usage_end_date")


def test_currency_must_be_three_letters(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError) as info:
        parse(write_csv(tmp_path / "cur.csv", [cur2_row(line_item_currency_code="US")]))
    assert info.value.column == "line_item_currency_code"


def test_a_focus_file_is_not_a_cur(tmp_path: Path) -> None:
    path = tmp_path / "focus.csv"
    path.write_text("BillingPeriodStart,ChargePeriodStart,BilledCost\n2024-09-01,2024-09-01,1\n")
    with pytest.raises(ImportFormatError, match="not an AWS CUR file"):
        parse(path)
