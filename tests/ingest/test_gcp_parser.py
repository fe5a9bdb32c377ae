"""The GCP BigQuery billing export parser: CSV (dotted names), JSON lines and Parquet; credits,
labels, cost types, invoice months, instance types and error messages."""

from __future__ import annotations

import csv
import gzip
import io
import json
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from billing_ingest.models import ImportBatch
from billing_ingest.parsers import billing_parser
from billing_ingest.parsers.gcp_billing import parse_gcp_billing
from billing_ingest.parsers.rows import LineItemRow
from finops.core.errors import ImportFormatError
from tests.builders import A3_SPEC, nested_record
from tests.gcp_credits import CREDITS_CSV, credit_rows, file_credits, net_cost

CSV_COLUMNS = [
    "billing_account_id",
    "service.id",
    "service.description",
    "sku.id",
    "sku.description",
    "usage_start_time",
    "usage_end_time",
    "project.id",
    "project.labels",
    "labels",
    "system_labels",
    "location.region",
    "cost",
    "currency",
    "usage.amount",
    "usage.unit",
    "credits",
    "invoice.month",
    "cost_type",
    "resource.name",
    "resource.global_name",
]


def csv_row(**values: str) -> dict[str, str]:
    row = {
        "billing_account_id": "0000AA-BBBBBB-CCCCCC",
        "service.id": "6F81-5844-456A",
        "service.description": "Compute Engine",
        "sku.id": "SKU-A3",
        "sku.description": "A3 Instance Core running in Americas",
        "usage_start_time": "2024-09-14 10:00:00+00:00",
        "usage_end_time": "2024-09-14 11:00:00+00:00",
        "project.id": "ml-prod",
        "project.labels": json.dumps([{"key": "team", "value": "platform"}]),
        "labels": json.dumps([{"key": "team", "value": "vision"}]),
        "system_labels": json.dumps(A3_SPEC),
        "location.region": "us-central1",
        "cost": "88.49",
        "currency": "USD",
        "usage.amount": "3600",
        "usage.unit": "seconds",
        "credits": json.dumps(
            [{"name": "CUD", "amount": -10.5, "type": "COMMITTED_USAGE_DISCOUNT"}]
        ),
        "invoice.month": "202409",
        "cost_type": "regular",
        "resource.name": "gke-train-a3-pool-1a2b3c4d-x9z8",
        "resource.global_name": "//compute.googleapis.com/projects/ml-prod/zones/us-central1-a/"
        "instances/gke-train-a3-pool-1a2b3c4d-x9z8",
    }
    row.update(values)
    return row


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str] = CSV_COLUMNS) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def parse(path: Path, **kwargs: Any) -> list[LineItemRow]:
    return [
        item for chunk in parse_gcp_billing(path, file_label=path.name, **kwargs) for item in chunk
    ]


def errors_of(path: Path) -> ImportFormatError:
    with pytest.raises(ImportFormatError) as caught:
        parse(path)
    return caught.value


def assert_a3_line(item: LineItemRow) -> None:
    assert item["billing_period"] == date(2024, 9, 1)
    assert item["billing_period_start"] == datetime(2024, 9, 1, tzinfo=UTC)
    assert item["billing_period_end"] == datetime(2024, 10, 1, tzinfo=UTC)
    assert item["charge_period_start"] == datetime(2024, 9, 14, 10, tzinfo=UTC)
    assert item["charge_period_end"] == datetime(2024, 9, 14, 11, tzinfo=UTC)
    assert item["provider_name"] == "Google Cloud"
    assert item["billing_account_id"] == "0000AA-BBBBBB-CCCCCC"
    assert item["sub_account_id"] == "ml-prod"
    assert item["service_name"] == "Compute Engine"
    assert item["sku_id"] == "SKU-A3"
    assert item["region_id"] == "us-central1"
    assert item["resource_name"] == "gke-train-a3-pool-1a2b3c4d-x9z8"
    assert item["resource_id"].endswith("/instances/gke-train-a3-pool-1a2b3c4d-x9z8")
    assert item["charge_category"] == "Usage"
    assert item["pricing_category"] == "Standard"
    # Google invoices cost + credits; the credit stays visible on the row it reduces.
    assert item["billed_cost"] == Decimal("88.49") + Decimal("-10.5")
    assert item["list_cost"] == Decimal("88.49")
    assert item["contracted_cost"] == Decimal("88.49")
    assert item["effective_cost"] == Decimal("88.49") + Decimal("-10.5")
    assert item["x_credits"] == [
        {"name": "CUD", "amount": "-10.5", "type": "COMMITTED_USAGE_DISCOUNT"}
    ]
    assert item["billing_currency"] == "USD"
    assert item["consumed_quantity"] == Decimal(3600)
    assert item["consumed_unit"] == "seconds"
    # Resource labels win over project labels; system labels are kept too.
    assert item["tags"]["team"] == "vision"
    assert item["tags"]["compute.googleapis.com/machine_spec"] == "a3-highgpu-8g"
    assert item["x_instance_type"] == "a3-highgpu-8g"


def test_registered_as_gcp_bigquery() -> None:
    assert billing_parser("gcp-bigquery") is parse_gcp_billing


def test_csv_with_dotted_columns(tmp_path: Path) -> None:
    (item,) = parse(write_csv(tmp_path / "export.csv", [csv_row()]))
    assert_a3_line(item)


def test_jsonl_with_nested_objects(tmp_path: Path) -> None:
    (item,) = parse(write_jsonl(tmp_path / "export.jsonl", [nested_record()]))
    assert_a3_line(item)


def test_gzipped_jsonl_without_a_telling_suffix(tmp_path: Path) -> None:
    plain = write_jsonl(tmp_path / "plain.json", [nested_record(), nested_record()])
    packed = tmp_path / "billing-000000000000"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    items = parse(packed)
    assert len(items) == 2
    assert_a3_line(items[1])


def test_parquet_with_nested_structs(tmp_path: Path) -> None:
    record = nested_record(
        usage_start_time=datetime(2024, 9, 14, 10, tzinfo=UTC),
        usage_end_time=datetime(2024, 9, 14, 11, tzinfo=UTC),
        usage={"amount": 3600.0, "unit": "seconds"},
    )
    path = tmp_path / "export.parquet"
    pq.write_table(pa.Table.from_pylist([record]), path)
    (item,) = parse(path)
    assert_a3_line(item)


def test_python_repr_credits_with_none(tmp_path: Path) -> None:
    credits = (
        "[{'name': 'FreeTrial:Credit-1', 'amount': -5e-06, 'full_name': None, "
        "'id': 'FreeTrial:Credit-1', 'type': 'PROMOTION'}, "
        "{'name': 'Sustained', 'amount': -0.25, 'full_name': None, 'id': 'x', 'type': 'SUD'}]"
    )
    row = csv_row(cost="1.000005", credits=credits, labels="[{'key': 'team', 'value': 'nlp'}]")
    (item,) = parse(write_csv(tmp_path / "repr.csv", [row]))
    net = Decimal("1.000005") - Decimal("0.000005") - Decimal("0.25")
    assert item["billed_cost"] == item["effective_cost"] == net
    assert item["tags"]["team"] == "nlp"


def test_python_list_credits_are_invoiced_exactly_and_stay_visible() -> None:
    rows = credit_rows()
    items = parse(CREDITS_CSV)
    assert len(items) == len(rows)
    for row, item in zip(rows, items, strict=True):
        credits = file_credits(row)
        # Google invoices the net: BilledCost is cost + credits, to the last digit.
        assert item["billed_cost"] == item["effective_cost"] == net_cost(row)
        assert item["contracted_cost"] == Decimal(row["cost"])
        assert [(c["type"], c["name"], Decimal(c["amount"])) for c in item["x_credits"]] == credits
        assert item["sub_account_name"] == row["project.name"]
    stored = [c["amount"] for item in items for c in item["x_credits"]]
    assert "-0.000005" in stored  # -5e-06, written plainly
    assert all("e" not in amount.lower() for amount in stored)
    invoiced = sum((item["billed_cost"] for item in items), Decimal(0))
    costs = sum((Decimal(row["cost"]) for row in rows), Decimal(0))
    credited = sum((a for row in rows for _, _, a in file_credits(row)), Decimal(0))
    assert invoiced == costs + credited != costs


def test_credit_digits_come_from_the_text_not_a_float(tmp_path: Path) -> None:
    # 18 significant digits: a float keeps 17 (-123456.78901234568).
    credits = (
        "[{'name': 'Reseller margin', 'amount': -123456.789012345678, 'full_name': None, "
        "'id': 'rm-1', 'type': 'RESELLER_MARGIN'}]"
    )
    row = csv_row(cost="200000.000000000001", credits=credits)
    (item,) = parse(write_csv(tmp_path / "digits.csv", [row]))
    assert item["billed_cost"] == Decimal("200000.000000000001") - Decimal("123456.789012345678")
    assert item["x_credits"] == [
        {
            "name": "Reseller margin",
            "amount": "-123456.789012345678",
            "full_name": None,
            "id": "rm-1",
            "type": "RESELLER_MARGIN",
        }
    ]


@pytest.mark.django_db
def test_the_import_says_which_credits_lowered_the_invoice() -> None:
    out = io.StringIO()
    call_command(
        "ingest_billing", "--format", "gcp-bigquery", str(CREDITS_CSV), "--no-attribute", stdout=out
    )
    rows = credit_rows()
    by_type: dict[str, Decimal] = {}
    for row in rows:
        for kind, _, amount in file_credits(row):
            by_type[kind] = by_type.get(kind, Decimal(0)) + amount
    totals = ImportBatch.objects.get().currency_totals["USD"]
    assert {k: Decimal(v) for k, v in totals["credits"].items()} == by_type
    assert Decimal(totals["billed"]) == sum(
        (Decimal(row["cost"]) for row in rows), Decimal(0)
    ) + sum(by_type.values(), Decimal(0))
    committed = format(by_type["COMMITTED_USAGE_DISCOUNT"].normalize(), "f")  # -100
    assert f"credits USD: COMMITTED_USAGE_DISCOUNT {committed}," in out.getvalue()


def test_empty_credits_and_labels(tmp_path: Path) -> None:
    row = csv_row(credits="[]", labels="", **{"project.labels": "[]", "system_labels": "[]"})
    (item,) = parse(write_csv(tmp_path / "empty.csv", [row]))
    assert item["effective_cost"] == item["billed_cost"]
    assert item["tags"] == {}
    assert item["x_instance_type"] == ""  # "A3 Instance Core" names no machine type


def test_project_labels_apply_when_the_resource_has_none(tmp_path: Path) -> None:
    (item,) = parse(write_csv(tmp_path / "proj.csv", [csv_row(labels="[]")]))
    assert item["tags"]["team"] == "platform"


def test_credits_are_never_evaluated_as_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    row = csv_row(credits=f"__import__('pathlib').Path({str(marker)!r}).touch()")
    error = errors_of(write_csv(tmp_path / "evil.csv", [row]))
    assert (error.row, error.column) == (2, "credits")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("cost_type", "category", "pricing"),
    [
        ("regular", "Usage", "Standard"),
        ("tax", "Tax", ""),
        ("adjustment", "Adjustment", ""),
        ("rounding_error", "Adjustment", ""),
        ("", "Usage", "Standard"),
    ],
)
def test_cost_type(tmp_path: Path, cost_type: str, category: str, pricing: str) -> None:
    (item,) = parse(write_csv(tmp_path / "ct.csv", [csv_row(cost_type=cost_type)]))
    assert item["charge_category"] == category
    assert item["pricing_category"] == pricing
    assert (item["consumed_quantity"] is None) is (category != "Usage")


@pytest.mark.parametrize(
    ("sku", "pricing"),
    [
        ("Spot Preemptible Nvidia H100 80GB GPU running in Americas", "Dynamic"),
        ("Preemptible N1 Predefined Instance Core running in Americas", "Dynamic"),
        ("Commitment v1: A3 Cpu in Americas for 1 Year", "Committed"),
        ("Nvidia H100 80GB GPU running in Americas", "Standard"),
    ],
)
def test_pricing_category_from_sku_description(tmp_path: Path, sku: str, pricing: str) -> None:
    (item,) = parse(write_csv(tmp_path / "p.csv", [csv_row(**{"sku.description": sku})]))
    assert item["pricing_category"] == pricing


def test_machine_type_named_in_the_sku_description(tmp_path: Path) -> None:
    row = csv_row(system_labels="[]", **{"sku.description": "a2-highgpu-1g running in Americas"})
    (item,) = parse(write_csv(tmp_path / "sku.csv", [row]))
    assert item["x_instance_type"] == "a2-highgpu-1g"


def test_invoice_month_spill_belongs_to_the_invoice(tmp_path: Path) -> None:
    row = csv_row(
        usage_start_time="2022-08-31T23:00:00Z",
        usage_end_time="2022-09-01T00:00:00Z",
        **{"invoice.month": "202209"},
    )
    (item,) = parse(write_csv(tmp_path / "spill.csv", [row]))
    assert item["billing_period"] == date(2022, 9, 1)
    assert item["charge_period_start"] == datetime(2022, 8, 31, 23, tzinfo=UTC)
    assert item["charge_period_end"] == datetime(2022, 9, 1, tzinfo=UTC)


def test_december_invoice_ends_in_january(tmp_path: Path) -> None:
    (item,) = parse(write_csv(tmp_path / "dec.csv", [csv_row(**{"invoice.month": "202412"})]))
    assert item["billing_period_end"] == datetime(2025, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "stamp",
    [
        "2022-08-01 00:00:00+00:00",
        "2022-08-01T00:00:00Z",
        "2022-08-01 00:00:00 UTC",
        "2022-08-01T02:00:00+02:00",
    ],
)
def test_timestamp_formats(tmp_path: Path, stamp: str) -> None:
    row = csv_row(usage_start_time=stamp, usage_end_time="2022-08-01T01:00:00Z")
    (item,) = parse(write_csv(tmp_path / "ts.csv", [row]))
    assert item["charge_period_start"] == datetime(2022, 8, 1, tzinfo=UTC)


def test_chunks(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "many.csv", [csv_row(cost=str(n)) for n in range(5)])
    chunks = list(parse_gcp_billing(path, file_label=path.name, chunk_size=2))
    assert [len(c) for c in chunks] == [2, 2, 1]


# --------------------------------------------------------------------------- errors


def test_missing_required_csv_column(tmp_path: Path) -> None:
    columns = [c for c in CSV_COLUMNS if c != "invoice.month"]
    error = errors_of(write_csv(tmp_path / "nomonth.csv", [csv_row()], columns))
    assert (error.file, error.row, error.column) == ("nomonth.csv", 1, "invoice.month")


def test_bad_cost_names_row_and_column(tmp_path: Path) -> None:
    error = errors_of(write_csv(tmp_path / "bad.csv", [csv_row(), csv_row(cost="1.2.3")]))
    assert str(error).startswith("file bad.csv, row 3, column cost:")


def test_bad_timestamp(tmp_path: Path) -> None:
    error = errors_of(write_csv(tmp_path / "ts.csv", [csv_row(usage_end_time="2022-13-01")]))
    assert (error.row, error.column) == (2, "usage_end_time")


@pytest.mark.parametrize("month", ["2024-09", "202413", "sept"])
def test_bad_invoice_month(tmp_path: Path, month: str) -> None:
    error = errors_of(write_csv(tmp_path / "m.csv", [csv_row(**{"invoice.month": month})]))
    assert (error.row, error.column) == (2, "invoice.month")


def test_bad_credit_amount(tmp_path: Path) -> None:
    row = csv_row(credits=json.dumps([{"name": "x", "amount": "lots"}]))
    error = errors_of(write_csv(tmp_path / "c.csv", [row]))
    assert (error.row, error.column) == (2, "credits")


def test_unknown_cost_type(tmp_path: Path) -> None:
    error = errors_of(write_csv(tmp_path / "u.csv", [csv_row(cost_type="gift")]))
    assert (error.row, error.column) == (2, "cost_type")


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    bad = nested_record(cost="free")
    path.write_text(json.dumps(nested_record()) + "\n\n" + json.dumps(bad) + "\n", encoding="utf-8")
    error = errors_of(path)
    assert (error.file, error.row, error.column) == ("lines.jsonl", 3, "cost")


def test_jsonl_missing_key_and_broken_json(tmp_path: Path) -> None:
    record = nested_record()
    del record["invoice"]
    error = errors_of(write_jsonl(tmp_path / "missing.jsonl", [nested_record(), record]))
    assert (error.row, error.column) == (2, "invoice.month")
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(nested_record()) + "\n{not json\n", encoding="utf-8")
    error = errors_of(path)
    assert error.row == 2
    assert "not valid JSON" in str(error)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    assert "empty" in str(errors_of(path))


def test_overlong_value_names_its_column(tmp_path: Path) -> None:
    row = csv_row(**{"resource.name": "n" * 1001})
    error = errors_of(write_csv(tmp_path / "long.csv", [row]))
    assert (error.row, error.column) == (2, "resource.name")
