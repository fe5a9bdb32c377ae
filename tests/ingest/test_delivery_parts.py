"""The parts of one delivery, on disk: checked to be one table before anything is imported (CSV
headers and Parquet schemas compared, JSON parts only kept apart from the others), and written
where their remote names cannot steer them.

The multi-part JSON-lines delivery runs end to end through a local `--delivery` folder here; the
same through gs:// is in test_gcs_fetch, hostile remote names in test_aws_s3_fetch (moto) and
test_azure_blob_fetch (Azurite)."""

from __future__ import annotations

import gzip
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from pytest_django import Settings

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.sources import SourceFetchError
from billing_ingest.sources.local import local_part_path
from billing_ingest.sources.parts import PartsMismatchError, parts_check
from tests.builders import nested_record

BOM = "\ufeff"


def jsonl(rows: list[dict[str, Any]]) -> str:
    # Decimals written as the JSON numbers they are (their float repr is the same digits).
    return "".join(json.dumps(row, default=float) + "\n" for row in rows)


def write(path: Path, text: str, *, gzipped: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gzipped else data)
    return path


def records(costs: list[tuple[str, str]], **overrides: Any) -> list[dict[str, Any]]:
    """BigQuery export records, (cost, credit) each, costs as JSON numbers."""
    return [
        nested_record(
            cost=Decimal(cost),
            credits=[{"name": "SUD", "amount": Decimal(credit), "type": "SUSTAINED_USAGE"}],
            **overrides,
        )
        for cost, credit in costs
    ]


# ------------------------------------------------------------------ parts_check


def test_json_lines_parts_are_not_compared_by_their_first_line(tmp_path: Path) -> None:
    # Each part's first line is a record, and BigQuery leaves NULL fields out of records.
    first = nested_record()
    sparse = {key: value for key, value in nested_record().items() if key != "labels"}
    parts = [
        write(tmp_path / "a.json", jsonl([first])),
        write(tmp_path / "b.json.gz", BOM + "\n" + jsonl([sparse]), gzipped=True),
        write(tmp_path / "c", jsonl([nested_record(cost=1)])),
    ]

    parts_check(parts)


def test_json_documents_spread_over_lines_pass_too(tmp_path: Path) -> None:
    # An OpenCost /cloudCost response is one pretty-printed document: its first line is "{".
    document = {"code": 200, "data": {"sets": []}}
    parts = [
        write(tmp_path / "a.json", json.dumps(document, indent=2)),
        write(tmp_path / "b.json", json.dumps({**document, "extra": 1}, indent=2)),
    ]

    parts_check(parts)


def test_json_mixed_with_csv_or_parquet_is_refused_naming_the_parts(tmp_path: Path) -> None:
    json_part = write(tmp_path / "a.json", jsonl([nested_record()]))
    csv_part = write(tmp_path / "b.csv", "cost,currency\n1,USD\n")
    parquet_part = tmp_path / "c.parquet"
    pq.write_table(pa.table({"cost": [1.0]}), parquet_part)

    with pytest.raises(PartsMismatchError, match="parts mix CSV and JSON: s3://a, s3://b"):
        parts_check([json_part, csv_part], labels=["s3://a", "s3://b"])
    with pytest.raises(PartsMismatchError, match="parts mix Parquet and JSON"):
        parts_check([json_part, parquet_part])


def test_csv_headers_are_still_compared(tmp_path: Path) -> None:
    parts = [
        write(tmp_path / "a.csv", BOM + "cost,currency\n1,USD\n"),
        write(tmp_path / "b.csv.gz", "cost,currency\n2,USD\n", gzipped=True),
        write(tmp_path / "c.csv", "cost,currency_code\n3,USD\n"),
    ]

    parts_check(parts[:2])
    with pytest.raises(PartsMismatchError, match=r"c\.csv: header differs"):
        parts_check(parts)


def test_a_corrupt_gzip_part_is_named(tmp_path: Path) -> None:
    whole = gzip.compress(jsonl([nested_record()]).encode())
    good = write(tmp_path / "a.json", jsonl([nested_record()]))
    truncated = tmp_path / "b.json.gz"
    truncated.write_bytes(whole[:8])

    with pytest.raises(PartsMismatchError, match=r"gs://b/b\.json\.gz: gzip data is corrupt"):
        parts_check([good, truncated], labels=["gs://b/a.json", "gs://b/b.json.gz"])


def test_a_delivery_without_parts_is_refused() -> None:
    with pytest.raises(SourceFetchError, match="no data files"):
        parts_check([])


# ------------------------------------------------------------------ a local folder delivery


@pytest.mark.django_db
def test_a_local_folder_of_json_lines_shards_is_one_batch(tmp_path: Path) -> None:
    folder = tmp_path / "gcp-2024-09"
    folder.mkdir()
    shards = [
        records([("88.49", "-10.5"), ("1.25", "0")]),
        records([("0.000123", "-0.000023")], labels=[]),
        records([("3.5", "-0.5"), ("7", "0"), ("12.125", "-2")]),
    ]
    for index, shard in enumerate(shards):
        write(folder / f"billing-{index:012d}.json.gz", jsonl(shard), gzipped=True)

    call_command(
        "ingest_billing",
        "--format",
        "gcp-bigquery",
        "--delivery",
        str(folder),
        "--no-attribute",
        stdout=io.StringIO(),
    )

    batch = ImportBatch.objects.get()
    every = [record for shard in shards for record in shard]
    assert (batch.status, batch.row_count) == (ImportBatch.Status.SUCCEEDED, len(every))
    assert batch.parts.count() == len(shards)
    cost = sum((record["cost"] for record in every), Decimal(0))
    credits = sum((c["amount"] for record in every for c in record["credits"]), Decimal(0))
    rows = CostLineItem.objects.filter(batch=batch)
    # Google invoices cost + credits: BilledCost and EffectiveCost are both the net.
    assert sum((row.billed_cost for row in rows), Decimal(0)) == cost + credits
    assert sum((row.effective_cost for row in rows), Decimal(0)) == cost + credits
    # The parts' credits add up in the batch's totals, by type.
    assert Decimal(batch.currency_totals["USD"]["credits"]["SUSTAINED_USAGE"]) == credits


# ------------------------------------------------------------------ local file names


@pytest.mark.parametrize(
    ("remote", "local"),
    [
        ("cur/gpu/data/BILLING_PERIOD=2024-09/gpu-00001.csv.gz", "00003.csv.gz"),
        ("exports/x/part_0_0001.snappy.parquet", "00003.snappy.parquet"),
        ("gcp/2024-09/billing-000000000000", "00003"),
        ("/etc/cron.d/evil.csv", "00003.csv"),
        ("a/../../../../evil.json", "00003.json"),
        ("a/..", "00003"),
        ("a/b/", "00003"),
        ("report.2024.09.csv", "00003.09.csv"),
        ("weird.c$v.gz", "00003.gz"),
    ],
)
def test_a_part_is_a_numbered_file_in_the_folder_keeping_its_suffixes(
    tmp_path: Path, remote: str, local: str
) -> None:
    dest = tmp_path / "delivery"

    path = local_part_path(dest, 3, remote)

    assert path == dest / local
    assert dest.is_dir()


# ------------------------------------------------------------------ parts told by their content

FOCUS_COLUMNS = [
    "BillingAccountId",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargeCategory",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ProviderName",
    "ResourceName",
    "ServiceName",
    "BilledCost",
    "EffectiveCost",
]


def focus_rows(costs: list[str]) -> list[list[str]]:
    return [
        ["1", "USD", "2024-09-01T00:00:00Z", "2024-10-01T00:00:00Z", "Usage",
         f"2024-09-02T{hour:02d}:00:00Z", f"2024-09-02T{hour + 1:02d}:00:00Z", "AWS",
         f"node-{hour}", "EC2", cost, cost]
        for hour, cost in enumerate(costs)
    ]  # fmt: skip


def focus_parquet(path: Path, costs: list[str]) -> Path:
    rows = focus_rows(costs)
    table = pa.table({name: [row[i] for row in rows] for i, name in enumerate(FOCUS_COLUMNS)})
    pq.write_table(table, path)
    return path


def focus_csv(costs: list[str]) -> str:
    lines = [",".join(FOCUS_COLUMNS), *(",".join(row) for row in focus_rows(costs))]
    return "\n".join(lines) + "\n"


def ingest_delivery(folder: Path, fmt: str = "focus") -> str:
    out = io.StringIO()
    call_command(
        "ingest_billing", "--format", fmt, "--delivery", str(folder), "--no-attribute", stdout=out
    )
    return out.getvalue()


@pytest.mark.django_db
def test_parquet_parts_without_an_extension_are_found_by_their_content(tmp_path: Path) -> None:
    # An Athena / AWS Data Exports style delivery: parts named by query id, no extension,
    # beside a manifest and a note, which are not data.
    folder = tmp_path / "athena-2024-09"
    folder.mkdir()
    focus_parquet(folder / "20240902_120000_00012_abcde_0", ["10.25", "4.5"])
    focus_parquet(folder / "20240902_120000_00012_abcde_1", ["0.125"])
    write(folder / "manifest.json", json.dumps({"files": ["a", "b"]}))
    write(folder / "README.txt", "Exported by Athena, see the console.\n")

    output = ingest_delivery(folder)

    batch = ImportBatch.objects.get()
    assert (batch.status, batch.row_count) == (ImportBatch.Status.SUCCEEDED, 3)
    assert batch.parts.count() == 2
    rows = CostLineItem.objects.filter(batch=batch)
    assert sum((row.billed_cost for row in rows), Decimal(0)) == Decimal("14.875")
    assert "manifest.json: skipped" in output
    assert "README.txt: skipped" in output


@pytest.mark.django_db
def test_gzip_and_csv_parts_without_an_extension_are_found_by_their_content(tmp_path: Path) -> None:
    folder = tmp_path / "delivery"
    folder.mkdir()
    write(folder / "part-0", focus_csv(["1.5", "2.25"]), gzipped=True)
    write(folder / "part-1", focus_csv(["3"]), gzipped=True)
    folder_plain = tmp_path / "plain"
    folder_plain.mkdir()
    write(folder_plain / "part-0", focus_csv(["7.5"]))
    write(folder_plain / "part-1", focus_csv(["0.5", "1"]))

    ingest_delivery(folder)
    ingest_delivery(folder_plain)

    def total(folder: Path) -> Decimal:
        batch = ImportBatch.objects.get(file_name=str(folder.resolve()))
        assert (batch.status, batch.parts.count()) == (ImportBatch.Status.SUCCEEDED, 2)
        rows = CostLineItem.objects.filter(batch=batch)
        return sum((row.billed_cost for row in rows), Decimal(0))

    assert total(folder) == Decimal("1.5") + Decimal("2.25") + Decimal("3")
    assert total(folder_plain) == Decimal("7.5") + Decimal("0.5") + Decimal("1")


@pytest.mark.parametrize(
    ("name", "content", "kind"),
    [
        ("part-0", b"PAR1....", "parquet"),
        ("part-0.bin", b"\x1f\x8b\x08\x00", "gzip"),
        ("export", b"PK\x03\x04rest", "zip"),
        ("export", "\ufeffBillingAccountId,BilledCost\n1,2\n".encode(), "csv"),
        ("export.csv", b"anything", "csv"),
        ("000000000000", b'{"cost": 1}\n', "json"),
        ("Manifest.json", b'{"files": []}', None),
        ("notes.txt", b"a, b, c\n", None),
        ("image", b"\x89PNG\r\n\x1a\n\x00\x00", None),
        ("empty", b"", None),
    ],
)
def test_billing_file_kind_reads_the_content(
    tmp_path: Path, name: str, content: bytes, kind: str | None
) -> None:
    from billing_ingest.services.billing_files import billing_file_kind

    path = tmp_path / name
    path.write_bytes(content)
    assert billing_file_kind(path) == kind


def test_an_overlong_csv_header_is_refused_without_reading_it_whole(
    tmp_path: Path, settings: Settings
) -> None:
    first = write(tmp_path / "a.csv", focus_csv(["1"]))
    long_header = ",".join(FOCUS_COLUMNS + [f"x_Extra{i}" for i in range(20)])
    second = write(tmp_path / "b.csv", long_header + "\n")
    assert len(focus_csv(["1"]).splitlines()[0]) < 200
    settings.FINOPS_MAX_LINE_BYTES = 200
    with pytest.raises(PartsMismatchError, match=r"b\.csv: header line is longer than 200 bytes"):
        parts_check([first, second], labels=["a.csv", "b.csv"])
