"""CoreWeave usage export (FOCUS columns, quantities only) priced with the contract rate card."""

from __future__ import annotations

import csv
import gzip
import io
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Sum

from billing_ingest.models import CoreWeaveRate, CostLineItem, ImportBatch
from billing_ingest.parsers import billing_parser
from billing_ingest.parsers.rows import LineItemRow
from finops.core.errors import ImportFormatError
from finops.core.money import MONEY_QUANTUM

pytestmark = pytest.mark.django_db

H100 = "gd-8xh100ib-i128"
H200 = "gd-8xh200ib-i128"

COLUMNS = [
    "BillingAccountId",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "PricingCategory",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ResourceId",
    "ResourceName",
    "SkuId",
    "x_InstanceType",
    "SubAccountId",
    "RegionId",
    "Tags",
    "BilledCost",
    "EffectiveCost",
]


def usage_row(**overrides: str) -> dict[str, str]:
    row = {
        "BillingAccountId": "acme-ai",
        "BillingPeriodStart": "2025-03-01T00:00:00Z",
        "BillingPeriodEnd": "2025-04-01T00:00:00Z",
        "ChargePeriodStart": "2025-03-10T00:00:00Z",
        "ChargePeriodEnd": "2025-03-11T00:00:00Z",
        "ChargeCategory": "Usage",
        "PricingCategory": "Standard",
        "ConsumedQuantity": "24",
        "ConsumedUnit": "Hours",
        "ResourceId": "coreweave:us-east-04:node/abc123",
        "ResourceName": "g8h100-node-01",
        "SkuId": H100,
        "x_InstanceType": H100,
        "SubAccountId": "tenant-acme-training",
        "RegionId": "US-EAST-04A",
        "Tags": '{"team": "vision"}',
        "BilledCost": "",
        "EffectiveCost": "",
    }
    row.update(overrides)
    return row


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    columns = columns or COLUMNS
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def rate(
    instance_type: str = H100,
    amount: str = "49.24",
    *,
    category: str = "Standard",
    valid_from: date = date(2025, 1, 1),
    valid_to: date | None = None,
    currency: str = "USD",
    unit: str = "Hours",
) -> CoreWeaveRate:
    return CoreWeaveRate.objects.create(
        instance_type=instance_type,
        pricing_category=category,
        currency=currency,
        rate=Decimal(amount),
        unit=unit,
        valid_from=valid_from,
        valid_to=valid_to,
    )


def parse(path: Path) -> list[LineItemRow]:
    parser = billing_parser("coreweave")
    return [item for chunk in parser(path, file_label=path.name) for item in chunk]


def expected(quantity: str, amount: str) -> Decimal:
    return (Decimal(quantity) * Decimal(amount)).quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN)


def test_cost_is_quantity_times_rate_in_every_billed_cost_column(tmp_path: Path) -> None:
    rate(amount="49.24")
    [item] = parse(write_csv(tmp_path / "cw.csv", [usage_row(ConsumedQuantity="7.5")]))
    cost = expected("7.5", "49.24")
    assert item["billed_cost"] == cost
    assert item["effective_cost"] == cost
    # The contract rate is not a list price: ListCost is left to the catalogue (issue 27).
    assert item["list_cost"] is None
    assert item["contracted_cost"] == cost
    assert item["billing_currency"] == "USD"
    assert item["provider_name"] == "CoreWeave"
    assert item["x_instance_type"] == H100
    assert item["sub_account_id"] == "tenant-acme-training"
    assert item["resource_name"] == "g8h100-node-01"
    assert item["tags"] == {"team": "vision"}
    assert item["billing_period"] == date(2025, 3, 1)


def test_rate_is_the_one_valid_on_the_charge_period_start_day(tmp_path: Path) -> None:
    # valid_to is the last day of a rate (inclusive); the next rate starts the day after.
    rate(amount="50.00", valid_from=date(2025, 1, 1), valid_to=date(2025, 3, 14))
    rate(amount="45.00", valid_from=date(2025, 3, 15))
    rows = [
        usage_row(ChargePeriodStart="2025-03-14T23:00:00Z", ChargePeriodEnd="2025-03-15T00:00Z"),
        usage_row(ChargePeriodStart="2025-03-15T00:00:00Z", ChargePeriodEnd="2025-03-15T01:00Z"),
    ]
    before, after = parse(write_csv(tmp_path / "cw.csv", rows))
    assert before["billed_cost"] == expected("24", "50.00")
    assert after["billed_cost"] == expected("24", "45.00")


def test_rate_depends_on_pricing_category_and_empty_category_is_standard(tmp_path: Path) -> None:
    rate(amount="49.24", category="Standard")
    rate(amount="35.00", category="Committed")
    rate(amount="20.00", category="Dynamic")
    rows = [
        usage_row(PricingCategory="Standard"),
        usage_row(PricingCategory="Committed"),
        usage_row(PricingCategory="Dynamic"),
        usage_row(PricingCategory=""),
    ]
    standard, committed, dynamic, blank = parse(write_csv(tmp_path / "cw.csv", rows))
    assert standard["billed_cost"] == expected("24", "49.24")
    assert committed["billed_cost"] == expected("24", "35.00")
    assert dynamic["billed_cost"] == expected("24", "20.00")
    assert blank["billed_cost"] == expected("24", "49.24")
    assert blank["pricing_category"] == "Standard"


def test_instance_type_from_sku_id_when_there_is_no_x_instance_type_column(tmp_path: Path) -> None:
    rate(H200, "60.10")
    columns = [c for c in COLUMNS if c != "x_InstanceType"]
    [item] = parse(write_csv(tmp_path / "cw.csv", [usage_row(SkuId=H200)], columns))
    assert item["x_instance_type"] == H200
    assert item["billed_cost"] == expected("24", "60.10")


def test_missing_rate_names_file_row_column_and_the_rate_needed(tmp_path: Path) -> None:
    rate(H100, "49.24")
    rows = [usage_row(), usage_row(x_InstanceType=H200, SkuId=H200)]
    with pytest.raises(ImportFormatError) as caught:
        parse(write_csv(tmp_path / "cw-march.csv", rows))
    error = caught.value
    assert (error.file, error.row, error.column) == ("cw-march.csv", 3, "x_InstanceType")
    assert H200 in error.detail
    assert "'Standard'" in error.detail
    assert "2025-03-10" in error.detail


def test_missing_rate_names_sku_id_when_the_type_comes_from_it(tmp_path: Path) -> None:
    columns = [c for c in COLUMNS if c != "x_InstanceType"]
    with pytest.raises(ImportFormatError) as caught:
        parse(write_csv(tmp_path / "cw.csv", [usage_row()], columns))
    assert (caught.value.row, caught.value.column) == (2, "SkuId")


def test_rate_outside_its_validity_is_missing(tmp_path: Path) -> None:
    rate(valid_from=date(2025, 4, 1))
    with pytest.raises(ImportFormatError, match="valid on 2025-03-10"):
        parse(write_csv(tmp_path / "cw.csv", [usage_row()]))


def test_rate_in_another_currency_than_the_file_is_missing(tmp_path: Path) -> None:
    rate(currency="EUR")
    columns = [*COLUMNS, "BillingCurrency"]
    with pytest.raises(ImportFormatError, match="currency USD"):
        parse(write_csv(tmp_path / "cw.csv", [usage_row(BillingCurrency="USD")], columns))


def test_overlapping_rates_are_refused_rather_than_guessed(tmp_path: Path) -> None:
    rate(amount="49.24", valid_from=date(2025, 1, 1))
    rate(amount="45.00", valid_from=date(2025, 3, 1))
    with pytest.raises(ImportFormatError, match="2 CoreWeave contract rates overlap"):
        parse(write_csv(tmp_path / "cw.csv", [usage_row()]))


def test_model_validation_rejects_an_overlapping_rate() -> None:
    rate(valid_from=date(2025, 1, 1), valid_to=date(2025, 6, 30))
    clash = CoreWeaveRate(
        instance_type=H100,
        pricing_category="Standard",
        currency="usd",
        rate=Decimal("40"),
        unit="Hours",
        valid_from=date(2025, 6, 30),
    )
    with pytest.raises(ValidationError, match="overlaps"):
        clash.full_clean()
    clash.valid_from = date(2025, 7, 1)
    clash.full_clean()
    assert clash.currency == "USD"


def test_unit_must_match_the_rate_unit(tmp_path: Path) -> None:
    rate(unit="Hours")
    rows = [usage_row(ConsumedUnit="Hour"), usage_row(ConsumedUnit="Seconds")]
    with pytest.raises(ImportFormatError) as caught:
        parse(write_csv(tmp_path / "cw.csv", rows))
    assert (caught.value.row, caught.value.column) == (3, "ConsumedUnit")


def test_empty_quantity_is_an_error_naming_the_column(tmp_path: Path) -> None:
    rate()
    with pytest.raises(ImportFormatError) as caught:
        parse(write_csv(tmp_path / "cw.csv", [usage_row(ConsumedQuantity="")]))
    assert (caught.value.row, caught.value.column) == (2, "ConsumedQuantity")


def test_costs_present_in_the_file_are_kept_as_in_focus(tmp_path: Path) -> None:
    # No rate at all: a row the export priced needs none.
    row = usage_row(BilledCost="100.50", EffectiveCost="90.25")
    [item] = parse(write_csv(tmp_path / "cw.csv", [row]))
    assert item["billed_cost"] == Decimal("100.50")
    assert item["effective_cost"] == Decimal("90.25")


def test_only_one_cost_column_filled_is_an_error(tmp_path: Path) -> None:
    rate()
    with pytest.raises(ImportFormatError) as caught:
        parse(write_csv(tmp_path / "cw.csv", [usage_row(BilledCost="10")]))
    assert caught.value.column == "EffectiveCost"


def test_product_is_rounded_once_half_even(tmp_path: Path) -> None:
    # A rate of one quantum: quantity x rate is exactly half-way at the 12th place for .5
    # quantities, where half-even goes to the even neighbour (half-up would give 1, 2, 3).
    rate(amount="0.000000000001")
    rows = [usage_row(ConsumedQuantity=q) for q in ("0.5", "1.5", "2.5")]
    costs = [item["billed_cost"] for item in parse(write_csv(tmp_path / "cw.csv", rows))]
    assert costs == [Decimal("0"), Decimal("0.000000000002"), Decimal("0.000000000002")]
    assert costs == [expected(q, "0.000000000001") for q in ("0.5", "1.5", "2.5")]


def test_gzip_and_parquet_exports_are_priced_too(tmp_path: Path) -> None:
    rate(amount="49.24")
    rows = [usage_row(ConsumedQuantity="2"), usage_row(ConsumedQuantity="3.25")]
    plain = write_csv(tmp_path / "plain.csv", rows)
    gz = tmp_path / "cw.csv.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    table = pa.table({name: [row[name] or None for row in rows] for name in COLUMNS})
    parquet = tmp_path / "cw.parquet"
    pq.write_table(table, parquet)
    want = [expected("2", "49.24"), expected("3.25", "49.24")]
    for path in (gz, parquet):
        assert [item["billed_cost"] for item in parse(path)] == want


def test_missing_instance_type_columns_is_a_header_error(tmp_path: Path) -> None:
    columns = [c for c in COLUMNS if c not in ("x_InstanceType", "SkuId")]
    with pytest.raises(ImportFormatError, match="x_InstanceType or SkuId"):
        parse(write_csv(tmp_path / "cw.csv", [usage_row()], columns))


def test_ingest_billing_end_to_end_sums_quantity_times_rate(tmp_path: Path) -> None:
    rate(H100, "49.24", valid_to=date(2025, 3, 15))
    rate(H100, "47.50", valid_from=date(2025, 3, 16))
    rate(H100, "30.00", category="Committed")
    rate(H200, "62.00")
    rows: list[dict[str, str]] = []
    want = Decimal(0)
    cases = [
        (H100, "Standard", "2025-03-15", "24", "49.24"),
        (H100, "Standard", "2025-03-16", "24", "47.50"),
        (H100, "Committed", "2025-03-20", "12.5", "30.00"),
        (H200, "Standard", "2025-03-21", "0.75", "62.00"),
    ]
    for instance_type, category, day, quantity, amount in cases:
        rows.append(
            usage_row(
                x_InstanceType=instance_type,
                SkuId=instance_type,
                PricingCategory=category,
                ChargePeriodStart=f"{day}T00:00:00Z",
                ChargePeriodEnd=f"{day}T23:59:59Z",
                ConsumedQuantity=quantity,
            )
        )
        want += expected(quantity, amount)
    path = write_csv(tmp_path / "coreweave-2025-03.csv", rows)
    out = io.StringIO()
    call_command("ingest_billing", "--format", "coreweave", str(path), stdout=out)
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert batch.source == "coreweave:coreweave-2025-03"
    assert batch.row_count == len(cases)
    assert batch.billing_periods == ["2025-03"]
    sums = CostLineItem.objects.filter(batch=batch).aggregate(
        billed=Sum("billed_cost"), effective=Sum("effective_cost"), listed=Sum("list_cost")
    )
    assert sums == {"billed": want, "effective": want, "listed": None}
    assert Decimal(batch.currency_totals["USD"]["effective"]) == want
    assert set(CostLineItem.objects.values_list("provider_name", flat=True)) == {"CoreWeave"}


def test_ingest_billing_without_a_rate_fails_the_batch_with_the_reason(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "coreweave-2025-03.csv", [usage_row()])
    with pytest.raises(CommandError, match="row 2, column x_InstanceType: no CoreWeave"):
        call_command("ingest_billing", "--format", "coreweave", str(path), stdout=io.StringIO())
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.FAILED
    assert H100 in batch.error
    assert not CostLineItem.objects.exists()
