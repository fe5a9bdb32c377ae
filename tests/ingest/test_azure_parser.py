"""The Azure cost details parser: EA and MCA headers, dates, charge types, pricing models, tags,
VM sizes, the FocusCost hand-off and error messages."""

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

from billing_ingest.parsers import billing_parser
from billing_ingest.parsers.azure_cost import parse_azure_cost
from billing_ingest.parsers.focus import parse_focus
from billing_ingest.parsers.rows import LineItemRow
from finops.core.errors import ImportFormatError

EA_COLUMNS = [
    "BillingAccountId",
    "BillingAccountName",
    "BillingPeriodStartDate",
    "BillingPeriodEndDate",
    "SubscriptionId",
    "Date",
    "PartNumber",
    "MeterId",
    "MeterCategory",
    "MeterSubCategory",
    "MeterName",
    "Quantity",
    "Cost",
    "BillingCurrency",
    "ResourceLocation",
    "ConsumedService",
    "ResourceId",
    "ResourceName",
    "AdditionalInfo",
    "Tags",
    "UnitOfMeasure",
    "ReservationId",
    "ChargeType",
    "PricingModel",
    "benefitId",
]
VMSS_ID = (
    "/subscriptions/sub-1/resourceGroups/MC_gpu/providers/Microsoft.Compute/"
    "virtualMachineScaleSets/aks-h100-12345678-vmss"
)
H100_INFO = json.dumps({"ServiceType": "Standard_ND96isr_H100_v5", "VMName": "aks-h100_0"})


def ea_row(**values: str) -> dict[str, str]:
    row = {
        "BillingAccountId": "8611537",
        "BillingAccountName": "Contoso",
        "BillingPeriodStartDate": "09/01/2024",
        "BillingPeriodEndDate": "09/30/2024",
        "SubscriptionId": "sub-1",
        "Date": "09/14/2024",
        "PartNumber": "AAA-1",
        "MeterId": "meter-1",
        "MeterCategory": "Virtual Machines",
        "MeterSubCategory": "NDisrH100v5 Series",
        "MeterName": "ND96isr H100 v5",
        "Quantity": "24",
        "Cost": "2352.00",
        "BillingCurrency": "USD",
        "ResourceLocation": "East US",
        "ConsumedService": "Microsoft.Compute",
        "ResourceId": VMSS_ID,
        "ResourceName": "aks-h100-12345678-vmss",
        "AdditionalInfo": H100_INFO,
        "Tags": '"team": "vision","env": "prod"',
        "UnitOfMeasure": "1 Hour",
        "ReservationId": "",
        "ChargeType": "Usage",
        "PricingModel": "OnDemand",
        "benefitId": "",
    }
    row.update(values)
    return row


def write_csv(
    path: Path, rows: list[dict[str, str]], columns: list[str] | None = None, *, bom: bool = True
) -> Path:
    columns = columns or list(rows[0])
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: row.get(column, "") for column in columns})
    path.write_text(("\ufeff" if bom else "") + buffer.getvalue(), encoding="utf-8")
    return path


def parse(path: Path, **kwargs: Any) -> list[LineItemRow]:
    return [
        item for chunk in parse_azure_cost(path, file_label=path.name, **kwargs) for item in chunk
    ]


def errors_of(path: Path) -> ImportFormatError:
    with pytest.raises(ImportFormatError) as caught:
        parse(path)
    return caught.value


def test_registered_as_azure() -> None:
    assert billing_parser("azure") is parse_azure_cost


def test_ea_usage_row_maps_to_focus_fields(tmp_path: Path) -> None:
    (item,) = parse(write_csv(tmp_path / "ea.csv", [ea_row()], EA_COLUMNS))
    assert item["billing_period"] == date(2024, 9, 1)
    assert item["billing_period_start"] == datetime(2024, 9, 1, tzinfo=UTC)
    assert item["billing_period_end"] == datetime(2024, 10, 1, tzinfo=UTC)
    assert item["charge_period_start"] == datetime(2024, 9, 14, tzinfo=UTC)
    assert item["charge_period_end"] == datetime(2024, 9, 15, tzinfo=UTC)
    assert item["provider_name"] == "Microsoft"
    assert item["billing_account_id"] == "8611537"
    assert item["sub_account_id"] == "sub-1"
    assert item["service_name"] == "Virtual Machines"
    assert item["sku_id"] == "meter-1"
    assert item["region_id"] == "eastus"
    assert item["resource_id"] == VMSS_ID
    assert item["resource_name"] == "aks-h100-12345678-vmss"
    assert item["charge_category"] == "Usage"
    assert item["pricing_category"] == "Standard"
    assert item["commitment_discount_status"] == ""
    assert item["consumed_quantity"] == Decimal(24)
    assert item["consumed_unit"] == "1 Hour"
    assert item["billed_cost"] == item["effective_cost"] == Decimal("2352.00")
    assert item["billing_currency"] == "USD"
    assert item["tags"] == {"team": "vision", "env": "prod"}
    assert item["x_instance_type"] == "Standard_ND96isr_H100_v5"
    assert item["list_cost"] is None


def test_same_row_shape_as_the_focus_parser(tmp_path: Path) -> None:
    focus_csv = tmp_path / "focus.csv"
    focus_csv.write_text(
        "BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,BilledCost,EffectiveCost\n"
        "2024-09-01T00:00:00Z,2024-09-14T00:00:00Z,2024-09-15T00:00:00Z,1,1\n"
    )
    (focus_item,) = [i for c in parse_focus(focus_csv, file_label="focus.csv") for i in c]
    (item,) = parse(write_csv(tmp_path / "ea.csv", [ea_row()], EA_COLUMNS))
    assert set(item) == set(focus_item)


def test_tags_with_and_without_outer_braces(tmp_path: Path) -> None:
    rows = [
        ea_row(Tags='"team": "x","env": "y"'),
        ea_row(Tags='{"team": "x", "env": "y"}'),
        ea_row(Tags=""),
    ]
    items = parse(write_csv(tmp_path / "tags.csv", rows, EA_COLUMNS))
    assert [i["tags"] for i in items] == [{"team": "x", "env": "y"}, {"team": "x", "env": "y"}, {}]


def test_mca_camel_case_headers_and_iso_dates(tmp_path: Path) -> None:
    row = {
        "billingAccountId": "mca-acct",
        "billingPeriodStartDate": "2024-09-01T00:00:00.0000000Z",
        "billingPeriodEndDate": "2024-09-30",
        "SubscriptionId": "sub-2",
        "date": "2024-09-30",
        "meterCategory": "Virtual Machines",
        "meterName": "NC24ads A100 v4",
        "meterId": "meter-2",
        "costInBillingCurrency": "12.5",
        "costInUsd": "99",
        "billingCurrency": "EUR",
        "resourceLocation": "westeurope",
        "ResourceId": "/subscriptions/sub-2/resourceGroups/rg/providers/Microsoft.Compute/"
        "virtualMachines/gpu-node-7",
        "tags": '"team": "speech"',
        "chargeType": "Usage",
        "pricingModel": "OnDemand",
        "paygCostInBillingCurrency": "15",
    }
    (item,) = parse(write_csv(tmp_path / "mca.csv", [row], bom=False))
    assert item["charge_period_start"] == datetime(2024, 9, 30, tzinfo=UTC)
    assert item["charge_period_end"] == datetime(2024, 10, 1, tzinfo=UTC)
    assert item["billing_period"] == date(2024, 9, 1)
    assert item["billing_account_id"] == "mca-acct"
    assert item["billed_cost"] == item["effective_cost"] == Decimal("12.5")
    assert item["list_cost"] == Decimal(15)
    assert item["billing_currency"] == "EUR"
    assert item["resource_name"] == "gpu-node-7"  # last segment of ResourceId
    assert item["tags"] == {"team": "speech"}
    assert item["x_instance_type"] == "Standard_NC24ads_A100_v4"  # from the meter name


def test_older_ea_names_and_unpadded_us_dates(tmp_path: Path) -> None:
    row = ea_row(Date="9/2/2023", BillingPeriodStartDate="9/1/2023", BillingPeriodEndDate="")
    row["CostInBillingCurrency"] = row.pop("Cost")
    row["BillingCurrencyCode"] = row.pop("BillingCurrency")
    del row["BillingAccountId"]
    (item,) = parse(write_csv(tmp_path / "old.csv", [row]))
    assert item["charge_period_start"] == datetime(2023, 9, 2, tzinfo=UTC)
    assert item["billing_period"] == date(2023, 9, 1)
    assert item["billing_period_end"] is None
    assert item["billed_cost"] == Decimal("2352.00")
    assert item["billing_account_id"] == "Contoso"  # BillingAccountName when no id


def test_no_billing_account_columns_leaves_it_empty(tmp_path: Path) -> None:
    columns = [c for c in EA_COLUMNS if not c.startswith("BillingAccount")]
    (item,) = parse(write_csv(tmp_path / "noacct.csv", [ea_row()], columns))
    assert item["billing_account_id"] == ""


@pytest.mark.parametrize(
    ("charge_type", "pricing_model", "category", "pricing", "status", "kind"),
    [
        ("Usage", "OnDemand", "Usage", "Standard", "", ""),
        ("Usage", "Reservation", "Usage", "Committed", "Used", "Reservation"),
        ("Usage", "SavingsPlan", "Usage", "Committed", "Used", "Savings Plan"),
        ("Usage", "Spot", "Usage", "Dynamic", "", ""),
        ("Usage", "", "Usage", "Standard", "", ""),
        ("UnusedReservation", "Reservation", "Usage", "Committed", "Unused", "Reservation"),
        ("UnusedSavingsPlan", "SavingsPlan", "Usage", "Committed", "Unused", "Savings Plan"),
        ("Purchase", "Reservation", "Purchase", "Standard", "", "Reservation"),
        ("Refund", "Reservation", "Purchase", "Standard", "", "Reservation"),
        ("RoundingAdjustment", "", "Adjustment", "", "", ""),
        ("Tax", "", "Tax", "", "", ""),
    ],
)
def test_charge_type_and_pricing_model(
    tmp_path: Path,
    charge_type: str,
    pricing_model: str,
    category: str,
    pricing: str,
    status: str,
    kind: str,
) -> None:
    row = ea_row(ChargeType=charge_type, PricingModel=pricing_model)
    (item,) = parse(write_csv(tmp_path / "c.csv", [row], EA_COLUMNS))
    assert item["charge_category"] == category
    assert item["pricing_category"] == pricing
    assert item["commitment_discount_status"] == status
    assert item["commitment_discount_type"] == kind
    # Unused commitment consumed nothing; non-usage rows have no consumed quantity.
    consumed = category == "Usage" and status != "Unused"
    assert (item["consumed_quantity"] is not None) is consumed


def test_unused_reservation_keeps_its_cost_and_reservation_id(tmp_path: Path) -> None:
    rows = [
        ea_row(ChargeType="Usage", PricingModel="Reservation", ReservationId="ri-1", Cost="60"),
        ea_row(
            ChargeType="UnusedReservation",
            PricingModel="Reservation",
            ReservationId="ri-1",
            Cost="40",
            ResourceId="",
            ResourceName="",
        ),
    ]
    items = parse(write_csv(tmp_path / "amortized.csv", rows, EA_COLUMNS))
    assert [i["commitment_discount_id"] for i in items] == ["ri-1", "ri-1"]
    assert [i["effective_cost"] for i in items] == [Decimal(60), Decimal(40)]
    assert sum(i["billed_cost"] for i in items) == Decimal(100)


def test_savings_plan_id_falls_back_to_benefit_id(tmp_path: Path) -> None:
    benefit = "/providers/Microsoft.BillingBenefits/savingsPlanOrders/o/savingsPlans/sp-1"
    row = ea_row(PricingModel="SavingsPlan", ReservationId="", benefitId=benefit)
    (item,) = parse(write_csv(tmp_path / "sp.csv", [row], EA_COLUMNS))
    assert item["commitment_discount_id"] == benefit


def test_purchase_rows_keep_cash_cost_in_actual_exports(tmp_path: Path) -> None:
    rows = [
        ea_row(ChargeType="Purchase", PricingModel="Reservation", Cost="1000", ResourceId=""),
        ea_row(ChargeType="Usage", PricingModel="Reservation", Cost="0"),
    ]
    items = parse(write_csv(tmp_path / "actual.csv", rows, EA_COLUMNS))
    assert [(i["billed_cost"], i["effective_cost"]) for i in items] == [
        (Decimal(1000), Decimal(1000)),
        (Decimal(0), Decimal(0)),
    ]


@pytest.mark.parametrize(
    ("info", "subcategory", "meter", "expected"),
    [
        (H100_INFO, "", "", "Standard_ND96isr_H100_v5"),
        (json.dumps({"VMName": "Standard_NC6s_v3"}), "", "", "Standard_NC6s_v3"),
        ("", "Standard_ND40rs_v2", "whatever", "Standard_ND40rs_v2"),
        ("", "NDisrH100v5 Series", "ND96isr H100 v5 Spot", "Standard_ND96isr_H100_v5"),
        ("", "Dv2/DSv2 Series", "D2 v2/DS2 v2", "Standard_D2_v2"),
        ("", "", "B1s Low Priority", "Standard_B1s"),
        (json.dumps({"ServiceType": "SQLThreatDetection"}), "", "Compute Hours", ""),
        ("not json {", "", "", ""),  # AdditionalInfo is informational: unreadable means unknown
    ],
)
def test_vm_size_from_additional_info_or_meter(
    tmp_path: Path, info: str, subcategory: str, meter: str, expected: str
) -> None:
    row = ea_row(AdditionalInfo=info, MeterSubCategory=subcategory, MeterName=meter)
    (item,) = parse(write_csv(tmp_path / "vm.csv", [row], EA_COLUMNS))
    assert item["x_instance_type"] == expected


def test_meter_name_is_not_a_size_outside_virtual_machines(tmp_path: Path) -> None:
    row = ea_row(AdditionalInfo="", MeterCategory="Storage", MeterName="P30 LRS Disk")
    (item,) = parse(write_csv(tmp_path / "disk.csv", [row], EA_COLUMNS))
    assert item["x_instance_type"] == ""
    assert item["service_name"] == "Storage"


def test_service_and_sku_fall_back_to_consumed_service_and_part_number(tmp_path: Path) -> None:
    row = ea_row(MeterCategory="", MeterId="", AdditionalInfo="")
    (item,) = parse(write_csv(tmp_path / "fallback.csv", [row], EA_COLUMNS))
    assert item["service_name"] == "Microsoft.Compute"
    assert item["sku_id"] == "AAA-1"


def test_gzip_and_chunks(tmp_path: Path) -> None:
    rows = [ea_row(Cost=str(n)) for n in range(1, 6)]
    plain = write_csv(tmp_path / "plain.csv", rows, EA_COLUMNS)
    packed = tmp_path / "packed.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    chunks = list(parse_azure_cost(packed, file_label=packed.name, chunk_size=2))
    assert [len(chunk) for chunk in chunks] == [2, 2, 1]
    assert sum(i["billed_cost"] for c in chunks for i in c) == Decimal(15)


def test_parquet_cost_details(tmp_path: Path) -> None:
    table = pa.Table.from_pylist(
        [
            {
                "BillingPeriodStartDate": datetime(2024, 9, 1, tzinfo=UTC),
                "Date": datetime(2024, 9, 14, tzinfo=UTC),
                "Cost": 12.34,
                "BillingCurrency": "USD",
                "ChargeType": "Usage",
                "PricingModel": "Spot",
                "Tags": '"team": "vision"',
            }
        ]
    )
    path = tmp_path / "costdetails.parquet"
    pq.write_table(table, path)
    (item,) = parse(path)
    assert item["billed_cost"] == Decimal("12.34")
    assert item["charge_period_start"] == datetime(2024, 9, 14, tzinfo=UTC)
    assert item["pricing_category"] == "Dynamic"
    assert item["tags"] == {"team": "vision"}


def test_focuscost_export_is_handed_to_the_focus_parser(tmp_path: Path) -> None:
    path = tmp_path / "focuscost.csv"
    path.write_text(
        "\ufeffBilledCost,BillingAccountId,BillingCurrency,BillingPeriodStart,ChargeCategory,"
        "ChargePeriodEnd,ChargePeriodStart,EffectiveCost,ProviderName,x_SkuMeterCategory\n"
        "10,acct,USD,2024-09-01T00:00:00Z,Usage,2024-09-15T00:00:00Z,2024-09-14T00:00:00Z,7,"
        "Microsoft,Virtual Machines\n",
        encoding="utf-8",
    )
    items = parse(path)
    assert items == [i for c in parse_focus(path, file_label=path.name) for i in c]
    assert (items[0]["billed_cost"], items[0]["effective_cost"]) == (Decimal(10), Decimal(7))


# --------------------------------------------------------------------------- errors


def test_missing_cost_column_names_file_row_and_column(tmp_path: Path) -> None:
    columns = [c for c in EA_COLUMNS if c != "Cost"]
    error = errors_of(write_csv(tmp_path / "nocost.csv", [ea_row()], columns))
    assert (error.file, error.row, error.column) == ("nocost.csv", 1, "CostInBillingCurrency")
    assert "CostInBillingCurrency or Cost" in str(error)


def test_missing_date_column(tmp_path: Path) -> None:
    columns = [c for c in EA_COLUMNS if c != "Date"]
    error = errors_of(write_csv(tmp_path / "nodate.csv", [ea_row()], columns))
    assert (error.row, error.column) == (1, "Date")


def test_bad_number_names_row_and_header_as_written(tmp_path: Path) -> None:
    rows = [ea_row(), ea_row(Cost="12,5 USD")]
    error = errors_of(write_csv(tmp_path / "bad.csv", rows, EA_COLUMNS))
    assert (error.file, error.row, error.column) == ("bad.csv", 3, "Cost")
    assert "'12,5 USD' is not a number" in str(error)
    assert str(error).startswith("file bad.csv, row 3, column Cost:")


def test_mca_bad_number_names_the_camel_case_column(tmp_path: Path) -> None:
    row = {
        "date": "2024-09-30",
        "billingPeriodStartDate": "2024-09-01",
        "costInBillingCurrency": "NaN",
        "billingCurrency": "USD",
    }
    error = errors_of(write_csv(tmp_path / "mca.csv", [row]))
    assert (error.row, error.column) == (2, "costInBillingCurrency")


@pytest.mark.parametrize("value", ["13/45/2024", "2024-02-30", "yesterday", ""])
def test_bad_dates(tmp_path: Path, value: str) -> None:
    error = errors_of(write_csv(tmp_path / "d.csv", [ea_row(Date=value)], EA_COLUMNS))
    assert (error.row, error.column) == (2, "Date")


def test_bad_billing_period_start(tmp_path: Path) -> None:
    row = ea_row(BillingPeriodStartDate="09/31/2024")
    error = errors_of(write_csv(tmp_path / "p.csv", [row], EA_COLUMNS))
    assert (error.row, error.column) == (2, "BillingPeriodStartDate")


def test_bad_tags_and_currency_and_charge_type(tmp_path: Path) -> None:
    error = errors_of(write_csv(tmp_path / "t.csv", [ea_row(Tags='"team": ')], EA_COLUMNS))
    assert (error.row, error.column) == (2, "Tags")
    error = errors_of(write_csv(tmp_path / "c.csv", [ea_row(BillingCurrency="$")], EA_COLUMNS))
    assert (error.row, error.column) == (2, "BillingCurrency")
    error = errors_of(write_csv(tmp_path / "k.csv", [ea_row(ChargeType="Gift")], EA_COLUMNS))
    assert (error.row, error.column) == (2, "ChargeType")
    assert "unknown ChargeType 'Gift'" in str(error)


def test_header_only_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text(",".join(EA_COLUMNS) + "\n")
    error = errors_of(path)
    assert "no data rows" in str(error)


def test_overlong_value_names_its_column(tmp_path: Path) -> None:
    row = ea_row(ResourceId="/subscriptions/" + "x" * 1000)
    error = errors_of(write_csv(tmp_path / "long.csv", [row], EA_COLUMNS))
    assert (error.row, error.column) == (2, "ResourceId")
    assert "longer than 1000 characters" in str(error)


# --- empty billingPeriodStartDate (seen on real MCA exports) -----------------------------------


def mca_row(usage_date: str, cost: str, period_start: str = "") -> dict[str, str]:
    return {
        "billingAccountId": "mca-acct",
        "billingPeriodStartDate": period_start,
        "billingPeriodEndDate": "",
        "date": usage_date,
        "meterCategory": "Storage",
        "costInBillingCurrency": cost,
        "billingCurrency": "USD",
        "chargeType": "Usage",
    }


def test_empty_billing_period_start_falls_back_to_the_usage_month(tmp_path: Path) -> None:
    rows = [
        mca_row("2024-09-30", "1.25"),
        mca_row("2024-10-01", "2.50"),
        mca_row("2024-10-02", "4.00", period_start="2024-09-01"),
    ]
    items = parse(write_csv(tmp_path / "mca.csv", rows, bom=False))
    assert [item["billing_period"] for item in items] == [
        date(2024, 9, 1),
        date(2024, 10, 1),
        date(2024, 9, 1),  # a stated period is kept, even when it is not the usage month
    ]
    assert items[0]["billing_period_start"] == datetime(2024, 9, 1, tzinfo=UTC)
    assert items[1]["billing_period_start"] == datetime(2024, 10, 1, tzinfo=UTC)
    notes = [item.get("_import_note") for item in items]
    assert notes[2] is None
    assert notes[0] == notes[1]
    assert "billingPeriodStartDate empty" in str(notes[0])


@pytest.mark.django_db
def test_import_summary_counts_the_rows_whose_period_was_inferred(tmp_path: Path) -> None:
    from django.core.management import call_command

    from billing_ingest.models import CostLineItem, ImportBatch

    rows = [
        mca_row("2024-09-29", "1.25"),
        mca_row("2024-09-30", "2.50"),
        mca_row("2024-09-30", "4.00", period_start="2024-09-01"),
    ]
    path = write_csv(tmp_path / "mca.csv", rows, bom=False)
    out = io.StringIO()
    call_command("ingest_billing", "--format", "azure", str(path), "--no-attribute", stdout=out)
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert batch.billing_periods == ["2024-09"]
    assert CostLineItem.objects.count() == 3
    note = "billingPeriodStartDate empty: billing period taken from the month of the usage date"
    assert batch.notes == {note: 2}
    assert f"note: 2 rows: {note}" in out.getvalue()


# --- legacy usage exports: UsageDateTime, PreTaxCost, SubscriptionGuid, no billing period -----

AZURE_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "azure"
LEGACY_FILES = ["legacy-usage-2025-06.csv", "legacy-usage-camelcase-2025-06.csv"]


def column_sum(path: Path, name: str) -> Decimal:
    """The column's sum, each cell at the stored money precision (12 places, half-even)."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows = list(csv.DictReader(handle))
    cells = (Decimal(row[name]).quantize(Decimal("1E-12")) for row in rows)
    return sum(cells, Decimal(0))


@pytest.mark.parametrize("name", LEGACY_FILES)
def test_legacy_usage_export_is_read(name: str) -> None:
    path = AZURE_FIXTURES / name
    items = parse(path)
    cost_column = "PreTaxCost" if "camel" not in name else "preTaxCost"
    assert sum((item["billed_cost"] for item in items), Decimal(0)) == column_sum(path, cost_column)
    assert all(item["billed_cost"] == item["effective_cost"] for item in items)
    # The billing period follows each row's usage date: no BillingPeriodStartDate in the file.
    assert [item["charge_period_start"].date() for item in items] == [
        date(2025, 6, 29),
        date(2025, 6, 30),
        date(2025, 6, 30),
        date(2025, 7, 1),
    ]
    assert [item["billing_period"] for item in items] == [date(2025, 6, 1)] * 3 + [date(2025, 7, 1)]
    assert items[3]["billing_period_start"] == datetime(2025, 7, 1, tzinfo=UTC)
    gpu = items[0]
    assert gpu["sub_account_id"] == "3f1c2b7e-8d4a-4f0e-9b6a-1c2d3e4f5a6b"
    assert gpu["resource_id"].endswith("/virtualMachines/gpu-node-1")
    assert gpu["resource_name"] == "gpu-node-1"
    assert gpu["x_instance_type"] == "Standard_ND96asr_v4"
    assert gpu["consumed_quantity"] == Decimal(24)
    assert gpu["tags"] == {"team": "vision"}
    assert (gpu["billing_currency"], gpu["region_id"]) == ("USD", "eastus")
    assert items[2]["billed_cost"] == Decimal("0.000006649635")
    assert {item.get("_import_note") for item in items} == {
        "no BillingPeriodStartDate column (legacy usage export): billing period taken from the "
        "month of the usage date"
    }


@pytest.mark.django_db
def test_legacy_usage_export_imports_and_reconciles() -> None:
    from django.core.management import call_command

    from billing_ingest.models import CostLineItem, ImportBatch
    from finops.core.money import MoneySum

    path = AZURE_FIXTURES / "legacy-usage-2025-06.csv"
    out = io.StringIO()
    call_command("ingest_billing", "--format", "azure", str(path), "--no-attribute", stdout=out)
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
    assert batch.billing_periods == ["2025-06", "2025-07"]
    total = CostLineItem.objects.aggregate(total=MoneySum("billed_cost"))["total"]
    assert total == column_sum(path, "PreTaxCost")
    assert "note: 4 rows: no BillingPeriodStartDate column" in out.getvalue()
