"""FOCUS ingestion: the parser's handling of real-world file shapes, end to end through
`ingest_billing --format focus` (command -> Celery task, eager here -> service -> ledger)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from pytest_django import Settings

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers.focus import parse_focus
from billing_ingest.services.billing import billing_batch_ingest
from billing_ingest.services.billing_files import billing_default_source
from finops.core.months import month_format
from tests.builders import FOCUS_COLUMNS as COLUMNS
from tests.builders import csv_text, focus_row
from tests.builders import write_focus_csv as write_csv

pytestmark = pytest.mark.django_db


def ingest(path: Path, *extra: str) -> tuple[ImportBatch, str]:
    out = io.StringIO()
    call_command("ingest_billing", "--format", "focus", str(path), *extra, stdout=out)
    return ImportBatch.objects.order_by("-id").first(), out.getvalue()  # type: ignore[return-value]


def items(batch: ImportBatch) -> list[CostLineItem]:
    return list(CostLineItem.objects.filter(batch=batch).order_by("id"))


def test_null_strings_and_empty_strings_are_null(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "nulls.csv",
        [
            focus_row(ListCost="NULL", ResourceName="NULL", Tags="NULL", PricingCategory=""),
            focus_row(ListCost="", ResourceName="", Tags="", SkuId="null"),
        ],
    )
    batch, _ = ingest(path)
    assert batch.status == ImportBatch.Status.SUCCEEDED
    first, second = items(batch)
    assert first.list_cost is None
    assert second.list_cost is None
    assert first.resource_name == ""
    assert second.resource_name == ""
    assert first.tags == {}
    assert second.tags == {}
    assert first.pricing_category == ""
    assert second.sku_id == ""


def test_timestamps_with_space_z_offset_and_date_only_all_become_utc(tmp_path: Path) -> None:
    expected = datetime(2024, 9, 5, 10, 0, tzinfo=UTC)
    spellings = [
        "2024-09-05 10:00:00",
        "2024-09-05T10:00:00Z",
        "2024-09-05T10:00:00",
        "2024-09-05T12:00:00+02:00",
        "2024-09-05T05:00:00-05:00",
    ]
    path = write_csv(tmp_path / "times.csv", [focus_row(ChargePeriodStart=s) for s in spellings])
    batch, _ = ingest(path)
    starts = [item.charge_period_start for item in items(batch)]
    assert starts == [expected] * len(spellings)
    assert all(s.utcoffset() == timedelta(0) for s in starts)
    only_date = tmp_path / "date.csv"
    write_csv(only_date, [focus_row(BillingPeriodStart="2024-09-01")])
    dated, _ = ingest(only_date)
    assert items(dated)[0].billing_period_start == datetime(2024, 9, 1, tzinfo=UTC)


def test_hour_past_24_rolls_into_next_day_as_in_the_spec_examples(tmp_path: Path) -> None:
    # FOCUS 1.2's commitment_discount_purchase_scenario_2.csv writes 2023-02-01T30:00:00Z.
    path = write_csv(tmp_path / "h30.csv", [focus_row(ChargePeriodEnd="2024-09-05T30:00:00Z")])
    batch, _ = ingest(path)
    assert items(batch)[0].charge_period_end == datetime(2024, 9, 6, 6, 0, tzinfo=UTC)


def test_utf8_bom_before_the_header_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "bom.csv"
    path.write_text(csv_text([focus_row()], COLUMNS), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    batch, _ = ingest(path)
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert items(batch)[0].billing_period_start == datetime(2024, 9, 1, tzinfo=UTC)


@pytest.mark.parametrize("name", ["export.csv.gz", "export-without-suffix.csv"])
def test_gzip_is_read_by_suffix_or_magic_bytes(tmp_path: Path, name: str) -> None:
    rows = [focus_row(BilledCost=str(i), EffectiveCost=f"{i}.5") for i in range(5)]
    path = tmp_path / name
    path.write_bytes(gzip.compress(csv_text(rows).encode()))
    batch, _ = ingest(path)
    assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
    assert batch.row_count == 5
    expected = sum(Decimal(r["EffectiveCost"]) for r in rows)
    assert sum(i.effective_cost for i in items(batch)) == expected


def test_parquet_written_by_pyarrow(tmp_path: Path) -> None:
    table = pa.table(
        {
            "BillingPeriodStart": pa.array(
                [datetime(2024, 9, 1, tzinfo=UTC)] * 3, pa.timestamp("us", tz="UTC")
            ),
            # Naive parquet timestamps are UTC.
            "ChargePeriodStart": pa.array([datetime(2024, 9, 5, 10)] * 3, pa.timestamp("ms")),
            "ChargePeriodEnd": pa.array(
                ["2024-09-05T11:00:00Z", "2024-09-05 11:00:00", None], pa.string()
            ),
            "BilledCost": pa.array(
                [Decimal("1.25"), Decimal("0.000000000001"), Decimal("-3")], pa.decimal128(20, 12)
            ),
            "EffectiveCost": pa.array([0.1, 0.2, 0.3], pa.float64()),
            "BillingCurrency": pa.array(["USD", "EUR", "USD"]),
            "ServiceProviderName": pa.array(["AWS", "Microsoft", None]),
            "Tags": pa.array(['{"team": "vision"}', None, "{}"]),
            "x_InstanceType": pa.array(["p4d.24xlarge", None, None]),
        }
    )
    # The third row has no ChargePeriodEnd: a required value, so drop it first and check it later.
    path = tmp_path / "export.parquet"
    pq.write_table(table.slice(0, 2), path)
    batch, out = ingest(path)
    assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
    first, second = items(batch)
    assert first.billed_cost == Decimal("1.25")
    assert second.billed_cost == Decimal("1E-12")
    # Floats go through str: 0.1, not 0.1000000000000000055511151231257827.
    assert first.effective_cost == Decimal("0.1")
    assert second.effective_cost == Decimal("0.2")
    assert first.charge_period_start == datetime(2024, 9, 5, 10, tzinfo=UTC)
    assert {first.charge_period_end, second.charge_period_end} == {
        datetime(2024, 9, 5, 11, tzinfo=UTC)
    }
    assert (first.provider_name, second.provider_name) == ("AWS", "Microsoft")
    assert first.tags == {"team": "vision"}
    assert second.tags == {}
    assert first.x_instance_type == "p4d.24xlarge"
    # Totals are fixed-point decimal strings, never exponent notation.
    assert batch.currency_totals["EUR"]["billed"] == "0.000000000001"
    assert "succeeded" in out

    bad = tmp_path / "missing-end.parquet"
    pq.write_table(table, bad)
    with pytest.raises(Exception, match="row 3, column ChargePeriodEnd"):
        ingest(bad)


def test_parquet_is_read_in_record_batches(tmp_path: Path) -> None:
    n = 7
    table = pa.table(
        {
            "BillingPeriodStart": ["2024-09-01"] * n,
            "ChargePeriodStart": ["2024-09-01"] * n,
            "ChargePeriodEnd": ["2024-09-02"] * n,
            "BilledCost": [str(i) for i in range(n)],
            "EffectiveCost": [str(i) for i in range(n)],
        }
    )
    path = tmp_path / "p.parquet"
    pq.write_table(table, path, row_group_size=3)
    chunks = list(parse_focus(path, file_label=path.name, chunk_size=3))
    assert [len(c) for c in chunks] == [3, 3, 1]
    assert [r["billed_cost"] for c in chunks for r in c] == [Decimal(i) for i in range(n)]


def test_csv_is_streamed_in_chunks(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "c.csv", [focus_row(BilledCost=str(i)) for i in range(5)])
    chunks = parse_focus(path, file_label=path.name, chunk_size=2)
    assert [len(c) for c in chunks] == [2, 2, 1]


def test_extra_and_unmapped_x_columns_are_ignored(tmp_path: Path) -> None:
    columns = ["Id", *COLUMNS, "x_Discounts", "x_CostCenter", "InvoiceIssuerName"]
    row = {**focus_row(), "Id": "11472", "x_Discounts": "[]", "x_CostCenter": "cc-9"}
    row["InvoiceIssuerName"] = "Amazon Web Services, Inc."
    batch, _ = ingest(write_csv(tmp_path / "extra.csv", [row], columns))
    item = items(batch)[0]
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert item.billed_cost == Decimal(row["BilledCost"])
    assert item.resource_id == row["ResourceId"]


def test_json_tags_round_trip(tmp_path: Path) -> None:
    tags = {"team": "vision", "k8s/namespace": "train", "cost-center": "42", "ünïcode": "✓"}
    azure_style = '"env": "prod", "team": "speech"'  # Azure: JSON without the outer braces
    path = write_csv(
        tmp_path / "tags.csv",
        [focus_row(Tags=json.dumps(tags)), focus_row(Tags=azure_style)],
    )
    batch, _ = ingest(path)
    first, second = items(batch)
    assert first.tags == tags
    assert second.tags == {"env": "prod", "team": "speech"}
    assert CostLineItem.objects.filter(tags__team="vision").count() == 1


def test_instance_type_from_x_column_then_sku_price_details(tmp_path: Path) -> None:
    columns = [*COLUMNS, "x_InstanceType", "SkuPriceDetails"]
    rows = [
        {**focus_row(), "x_InstanceType": "p5.48xlarge", "SkuPriceDetails": ""},
        {**focus_row(), "x_InstanceType": "NULL", "SkuPriceDetails": '{"InstanceType": "g5.xl"}'},
        {**focus_row(), "x_InstanceType": "", "SkuPriceDetails": '{"vCPU": 4}'},
    ]
    batch, _ = ingest(write_csv(tmp_path / "it.csv", rows, columns))
    found = [(i.x_instance_type, i.x_gpu_count, i.x_gpu_model) for i in items(batch)]
    assert found == [("p5.48xlarge", None, ""), ("g5.xl", None, ""), ("", None, "")]


def test_instance_type_from_azure_x_sku_details(tmp_path: Path) -> None:
    columns = [*COLUMNS, "x_SkuDetails"]
    rows = [{**focus_row(), "x_SkuDetails": '{"InstanceType": "Standard_ND96asr_v4"}'}]
    batch, _ = ingest(write_csv(tmp_path / "az.csv", rows, columns))
    assert items(batch)[0].x_instance_type == "Standard_ND96asr_v4"


def test_money_is_quantized_half_even(tmp_path: Path) -> None:
    rows = [
        focus_row(BilledCost="0.0000000000005", EffectiveCost="0.0000000000015"),
        focus_row(BilledCost="1e-3", EffectiveCost="12.123456789012"),
    ]
    batch, _ = ingest(write_csv(tmp_path / "q.csv", rows))
    first, second = items(batch)
    assert first.billed_cost == Decimal("0")
    assert first.effective_cost == Decimal("2E-12")
    assert second.billed_cost == Decimal("0.001")
    assert second.effective_cost == Decimal("12.123456789012")


def test_missing_billing_currency_column_uses_the_default(
    tmp_path: Path, settings: Settings
) -> None:
    settings.FINOPS_DEFAULT_CURRENCY = "EUR"
    columns = [c for c in COLUMNS if c != "BillingCurrency"]
    row = {k: v for k, v in focus_row().items() if k in columns}
    batch, _ = ingest(write_csv(tmp_path / "nocur.csv", [row], columns))
    assert items(batch)[0].billing_currency == "EUR"
    assert list(batch.currency_totals) == ["EUR"]


def test_totals_per_currency_and_billing_period_from_billing_period_start(tmp_path: Path) -> None:
    rows = [
        focus_row(BilledCost="1.10", EffectiveCost="1.00"),
        focus_row(BilledCost="2.20", EffectiveCost="2.00", BillingCurrency="eur"),
        # A September charge billed on the October invoice belongs to October.
        focus_row(BillingPeriodStart="2024-10-01 00:00:00", BilledCost="3.30", EffectiveCost="3"),
    ]
    batch, out = ingest(write_csv(tmp_path / "t.csv", rows))
    assert batch.billing_periods == ["2024-09", "2024-10"]
    usd = batch.currency_totals["USD"]
    assert Decimal(usd["billed"]) == Decimal("4.40")
    assert Decimal(usd["effective"]) == 4
    assert usd["rows"] == 2
    assert Decimal(batch.currency_totals["EUR"]["effective"]) == Decimal("2.00")
    october = CostLineItem.objects.get(batch=batch, billing_period__month=10)
    assert october.charge_period_start.month == 9
    assert "2 rows" not in out
    assert "3 rows" in out
    assert "periods 2024-09, 2024-10" in out


def test_sample_with_one_october_row_has_two_periods(samples_dir: Path) -> None:
    path = samples_dir / "focus" / "focus_1.0_sample_1000rows_aws_azure_oci.csv"
    with path.open(newline="", encoding="utf-8-sig") as handle:
        by_month = Counter(row["BillingPeriodStart"][:7] for row in csv.DictReader(handle))
    batch, _ = ingest(path)
    assert batch.billing_periods == sorted(by_month)
    stored = Counter(
        month_format(i.billing_period) for i in CostLineItem.objects.filter(batch=batch)
    )
    assert stored == by_month
    assert len(by_month) == 2


def test_same_file_twice_is_a_no_op(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "same.csv", [focus_row(), focus_row(ResourceId="i-2")])
    first, _ = ingest(path)
    second, out = ingest(path)
    assert first.status == ImportBatch.Status.SUCCEEDED
    assert second.status == ImportBatch.Status.DUPLICATE
    assert "unchanged" in out
    assert CostLineItem.objects.count() == 2
    assert CostLineItem.objects.filter(batch=first).count() == 2


def test_default_source_is_format_and_stem_and_source_option_overrides(tmp_path: Path) -> None:
    path = tmp_path / "acme-2024-09.csv.gz"
    path.write_bytes(gzip.compress(csv_text([focus_row()]).encode()))
    assert billing_default_source(format="focus", path=path) == "focus:acme-2024-09"
    assert billing_default_source(format="focus", path=Path("x.parquet")) == "focus:x"
    batch, _ = ingest(path)
    assert batch.source == "focus:acme-2024-09"
    assert CostLineItem.objects.get(batch=batch).source == "focus:acme-2024-09"
    other = write_csv(tmp_path / "other.csv", [focus_row()])
    named, _ = ingest(other, "--source", "aws-payer-1")
    assert named.source == "aws-payer-1"
    assert named.format == "focus"
    assert named.kind == ImportBatch.Kind.BILLING


def test_folder_makes_one_batch_per_file(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    (folder / "sub").mkdir(parents=True)
    write_csv(folder / "a.csv", [focus_row()])
    write_csv(folder / "sub" / "b.csv", [focus_row(), focus_row()])
    (folder / ".hidden.csv").write_text("junk")
    (folder / "manifest.json").write_text("{}")
    (folder / "a.csv.focus-report.txt").write_text("validator output")
    out = io.StringIO()
    call_command("ingest_billing", "--format", "focus", str(folder), stdout=out)
    batches = ImportBatch.objects.order_by("id")
    assert [(b.source, b.row_count) for b in batches] == [("focus:a", 1), ("focus:b", 2)]
    lines = out.getvalue().strip().splitlines()
    file_lines = [line for line in lines if line.startswith(str(folder))]
    assert sum("succeeded" in line for line in file_lines) == 2
    assert sum("skipped" in line for line in file_lines) == 2
    # Then the billing month the files touched is attributed once.
    assert [line for line in lines if line.startswith("attribution")] == [
        "attribution 2024-09: succeeded"
    ]


def test_service_on_a_finished_batch_returns_it_unchanged(tmp_path: Path) -> None:
    batch, _ = ingest(write_csv(tmp_path / "once.csv", [focus_row()]))
    again = billing_batch_ingest(batch_id=batch.pk)
    assert again.status == ImportBatch.Status.SUCCEEDED
    assert again.finished_at == batch.finished_at
    assert CostLineItem.objects.count() == 1
