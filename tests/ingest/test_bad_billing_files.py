"""Bad billing files fail loudly and harmlessly: CommandError, batch FAILED with a message naming
file, row and column, nothing of the bad file stored, the previous good data unchanged.

The bad files restate the same source and period as the good one, so a failure that leaked
would show up as lost or extra rows. The parser's chunk size is shrunk to 2 rows so that bad
values late in a file arrive after earlier chunks were already inserted: those must roll back.
"""

from __future__ import annotations

import csv
import gzip
import io
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pytest_django import Settings

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers import focus

pytestmark = pytest.mark.django_db

SOURCE = "aws-payer"
COLUMNS = [
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ResourceId",
    "BilledCost",
    "EffectiveCost",
    "BillingCurrency",
]


def row(resource: str, cost: str = "1.5", **overrides: str) -> dict[str, str]:
    values = {
        "BillingPeriodStart": "2024-09-01 00:00:00",
        "BillingPeriodEnd": "2024-10-01 00:00:00",
        "ChargePeriodStart": "2024-09-02 00:00:00",
        "ChargePeriodEnd": "2024-09-02 01:00:00",
        "ResourceId": resource,
        "BilledCost": cost,
        "EffectiveCost": cost,
        "BillingCurrency": "USD",
    }
    values.update(overrides)
    return values


def csv_bytes(rows: list[dict[str, str]], columns: list[str] = COLUMNS) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def ingest(path: Path) -> None:
    call_command(
        "ingest_billing",
        "--format",
        "focus",
        str(path),
        "--source",
        SOURCE,
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )


def snapshot() -> tuple[int, Decimal, set[int]]:
    values = list(CostLineItem.objects.values_list("effective_cost", "batch_id"))
    return len(values), sum((v for v, _ in values), Decimal(0)), {b for _, b in values}


@pytest.fixture
def good(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Decimal, set[int]]:
    monkeypatch.setattr(focus, "CHUNK_ROWS", 2)
    path = tmp_path / "good.csv"
    path.write_bytes(csv_bytes([row(f"r{i}", f"{i}.25") for i in range(5)]))
    ingest(path)
    before = snapshot()
    assert before[0] == 5
    return before


def assert_failed_harmlessly(path: Path, good: tuple[int, Decimal, set[int]], *where: str) -> str:
    with pytest.raises(CommandError) as raised:
        ingest(path)
    batch = ImportBatch.objects.get(file_name=str(path.resolve()))
    assert batch.status == ImportBatch.Status.FAILED
    assert batch.error.startswith(f"file {path.name}")
    for part in where:
        assert part in batch.error
    assert batch.error in str(raised.value)
    assert not CostLineItem.objects.filter(batch=batch).exists()
    assert snapshot() == good
    previous = ImportBatch.objects.get(file_name__endswith="good.csv")
    assert previous.status == ImportBatch.Status.SUCCEEDED
    return batch.error


def test_bad_number(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    rows = [row(f"n{i}") for i in range(5)] + [row("bad", EffectiveCost="abc")]
    path = tmp_path / "bad-number.csv"
    path.write_bytes(csv_bytes(rows))
    error = assert_failed_harmlessly(path, good)
    # Header is row 1; the sixth data row is row 7.
    assert error == "file bad-number.csv, row 7, column EffectiveCost: 'abc' is not a number"


def test_missing_required_column(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    columns = [c for c in COLUMNS if c != "EffectiveCost"]
    path = tmp_path / "no-effective.csv"
    path.write_bytes(csv_bytes([row("r1")], columns))
    error = assert_failed_harmlessly(path, good, "column EffectiveCost", "missing required")
    # A header problem names row 1 (the header) in a CSV, as every CSV format does.
    assert error.startswith("file no-effective.csv, row 1, column EffectiveCost:")


def test_truncated_gzip(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    # Random-ish resource ids keep the data from compressing to almost nothing.
    rows = [row(f"resource-{i * 7919 % 100003:06d}-{i}", f"{i}.{i % 97:02d}") for i in range(400)]
    whole = gzip.compress(csv_bytes(rows))
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    error = assert_failed_harmlessly(path, good, "truncated", ", row ")
    reached = int(error.split(", row ")[1].split(":")[0].split(",")[0])
    assert 2 < reached < 402


def test_bad_currency(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    path = tmp_path / "currency.csv"
    path.write_bytes(csv_bytes([row("r1"), row("r2", BillingCurrency="US$")]))
    assert_failed_harmlessly(path, good, "row 3, column BillingCurrency", "'US$'")


def test_empty_file(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    assert_failed_harmlessly(path, good, "empty")


def test_header_without_rows(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    path = tmp_path / "header-only.csv"
    path.write_bytes(csv_bytes([]))
    assert_failed_harmlessly(path, good, "no data rows")


def test_bad_timestamp(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    path = tmp_path / "when.csv"
    rows = [row(f"t{i}") for i in range(3)] + [row("x", ChargePeriodStart="2024-13-45 00:00")]
    path.write_bytes(csv_bytes(rows))
    assert_failed_harmlessly(
        path, good, "row 5, column ChargePeriodStart", "'2024-13-45 00:00' is not a timestamp"
    )


def test_row_with_wrong_number_of_values(
    tmp_path: Path, good: tuple[int, Decimal, set[int]]
) -> None:
    path = tmp_path / "ragged.csv"
    path.write_bytes(csv_bytes([row("r1")]) + b"2024-09-01,only,three\n")
    assert_failed_harmlessly(path, good, "row 3", "3 values")


def test_required_value_missing(tmp_path: Path, good: tuple[int, Decimal, set[int]]) -> None:
    path = tmp_path / "null-cost.csv"
    path.write_bytes(csv_bytes([row("r1"), row("r2", BilledCost="NULL")]))
    assert_failed_harmlessly(path, good, "row 3, column BilledCost")


def test_one_bad_file_in_a_folder_fails_the_command_but_not_the_others(
    tmp_path: Path, good: tuple[int, Decimal, set[int]]
) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a-ok.csv").write_bytes(
        csv_bytes([row("ok", "2", BillingPeriodStart="2024-10-01 00:00:00")])
    )
    (folder / "b-bad.csv").write_bytes(csv_bytes([row("bad", "oops")]))
    with pytest.raises(CommandError, match="1 of 2 file"):
        ingest(folder)
    assert CostLineItem.objects.filter(resource_id="ok").count() == 1
    assert not CostLineItem.objects.filter(resource_id="bad").exists()
    assert CostLineItem.objects.filter(billing_period__month=9).count() == good[0]


# --- a line longer than FINOPS_MAX_LINE_BYTES ---------------------------------------------------

LINE_CAP = 2 * 1024 * 1024  # above pyarrow's 1 MB block, so the columnar path gives up too


@pytest.mark.parametrize("gzipped", [False, True])
def test_overlong_line_fails_naming_file_and_row(
    tmp_path: Path, good: tuple[int, Decimal, set[int]], settings: Settings, gzipped: bool
) -> None:
    settings.FINOPS_MAX_LINE_BYTES = LINE_CAP
    # Row 4 (the third data row) is one line of 3 MB with no newline before its end.
    rows = [row("r0"), row("r1"), row("x" * (3 * 1024 * 1024)), row("r3")]
    data = csv_bytes(rows)
    path = tmp_path / ("huge.csv.gz" if gzipped else "huge.csv")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    error = assert_failed_harmlessly(path, good, ", row 4:", "FINOPS_MAX_LINE_BYTES")
    assert f"{LINE_CAP:,} bytes" in error


def test_line_within_the_cap_is_read(
    tmp_path: Path, good: tuple[int, Decimal, set[int]], settings: Settings
) -> None:
    settings.FINOPS_MAX_LINE_BYTES = 200
    rows = [row("r" * 60, "2.5")]  # each line under 200 bytes
    data = csv_bytes(rows)
    assert max(len(line) for line in data.splitlines()) < 200
    path = tmp_path / "short.csv"
    path.write_bytes(data)
    ingest(path)
    assert ImportBatch.objects.get(file_name=str(path.resolve())).status == "succeeded"


def test_overlong_json_line_fails_naming_file_and_row(tmp_path: Path, settings: Settings) -> None:
    from billing_ingest.parsers import billing_parser
    from finops.core.errors import ImportFormatError

    settings.FINOPS_MAX_LINE_BYTES = 1000
    path = tmp_path / "shard-000000000000"
    # Blank lines first: the cap counts physical lines, so the overlong record is line 3.
    path.write_text('\n\n{"service": {"description": "' + "y" * 5000 + '"}}\n')
    with pytest.raises(ImportFormatError) as caught:
        for _ in billing_parser("gcp-bigquery")(path, file_label="shard-000000000000"):
            pass
    assert (caught.value.file, caught.value.row) == ("shard-000000000000", 3)
    assert "FINOPS_MAX_LINE_BYTES" in str(caught.value)
