"""What one input file may make an import do (issue 25, items 1, 9 and 10).

- A 4 MB gzip of a FOCUS header and 4 GiB of newlines held an import `running` for over 25
  minutes (and, on SQLite, every login answered "database is locked"): decompressed bytes, the
  compression ratio and blank lines are bounded, such a file fails within seconds naming it,
  the previous data kept, and the file is never read inside the write transaction on SQLite.
- A 1 MB CSV with 100,000 columns took the web process to 1.8 GB: the column count is bounded
  on every CSV reader before anything is built per column.
- JSON nested 5,000 levels deep answered 500 on the budgets API and failed a Kubernetes upload
  with a RecursionError naming no file: the API answers 400, every JSON reader fails its batch
  naming the file.
"""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from collections.abc import Iterator
from datetime import UTC
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.urls import reverse
from pytest_django import Settings
from rest_framework.test import APIClient

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers.focus import parse_focus
from billing_ingest.parsers.lines import capped_binary_lines
from billing_ingest.parsers.opencost_cloudcost import parse_opencost_cloudcost
from billing_ingest.parsers.prometheus_text import json_samples
from billing_ingest.parsers.slurm import parse_sacct
from billing_ingest.services import billing as billing_service
from billing_ingest.services.utilisation import utilisation_import
from finops.core.errors import ImportFormatError
from finops.inference.parsers.usage_csv import parse_usage_csv
from tests.builders import FIRST_DUMP, csv_text, focus_row, legacy_row

pytestmark = pytest.mark.django_db

SOURCE = "focus:bounds"
DEEP = 5_000


@pytest.fixture(autouse=True)
def data_dir(settings: Settings, tmp_path: Path) -> Path:
    settings.FINOPS_DATA_DIR = tmp_path / "data"
    return settings.FINOPS_DATA_DIR


def _ingest(path: Path) -> None:
    call_command(
        "ingest_billing",
        "--format",
        "focus",
        str(path),
        "--source",
        SOURCE,
        "--no-attribute",
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )


def _focus_header() -> str:
    return csv_text([focus_row()]).splitlines()[0] + "\n"


def _gzip_of(path: Path, head: bytes, filler: bytes, total: int) -> Path:
    """head, then filler repeated to `total` bytes, gzipped in blocks (small on disk)."""
    block = filler * (1024 * 1024 // len(filler))
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as out:
        out.write(head)
        for _ in range(total // len(block)):
            out.write(block)
    return path


@pytest.fixture
def previous(tmp_path: Path) -> tuple[int, Decimal]:
    good = tmp_path / "good.csv"
    good.write_text(csv_text([focus_row(ResourceId=f"i-{i}") for i in range(3)]))
    _ingest(good)
    rows = list(CostLineItem.objects.values_list("effective_cost", flat=True))
    assert len(rows) == 3
    return len(rows), sum(rows, Decimal(0))


def _failed_naming(path: Path, previous: tuple[int, Decimal]) -> str:
    with pytest.raises(CommandError):
        _ingest(path)
    batch = ImportBatch.objects.get(file_name=str(path.resolve()))
    assert batch.status == ImportBatch.Status.FAILED
    assert batch.error.startswith(f"file {path.name}")
    assert not CostLineItem.objects.filter(batch=batch).exists()
    rows = list(CostLineItem.objects.values_list("effective_cost", flat=True))
    assert (len(rows), sum(rows, Decimal(0))) == previous
    return batch.error


# --------------------------------------------------------------------------- item 1: bombs


def test_gzip_of_blank_lines_fails_naming_the_file_previous_data_kept(
    tmp_path: Path, previous: tuple[int, Decimal]
) -> None:
    # 128 MiB of newlines after a valid FOCUS header: about 130 KB on disk.
    bomb = _gzip_of(tmp_path / "bomb.csv.gz", _focus_header().encode(), b"\n", 128 << 20)
    assert bomb.stat().st_size < 1 << 20

    error = _failed_naming(bomb, previous)

    assert "decompresses to more than 200 times its size (FINOPS_MAX_COMPRESSION_RATIO)" in error


def test_plain_file_of_blank_lines_fails_naming_the_file(
    tmp_path: Path, previous: tuple[int, Decimal]
) -> None:
    path = tmp_path / "blank.csv"
    path.write_bytes(_focus_header().encode() + b"\n" * (8 << 20))

    error = _failed_naming(path, previous)

    assert "more than 1,000 blank lines in a row (FINOPS_MAX_EMPTY_LINES_IN_A_ROW)" in error


def test_blank_lines_in_all_are_bounded_too(tmp_path: Path, settings: Settings) -> None:
    settings.FINOPS_MAX_EMPTY_LINES = 50
    lines = (b"a\n" + b"\n" * 10) * 10  # never 11 in a row, 100 in all
    with pytest.raises(ImportFormatError) as raised:
        list(capped_binary_lines(io.BytesIO(lines), file_label="spaced.txt"))
    assert str(raised.value).startswith("file spaced.txt, row ")
    assert "(FINOPS_MAX_EMPTY_LINES)" in str(raised.value)


def test_decompressed_bytes_are_bounded(
    tmp_path: Path, settings: Settings, previous: tuple[int, Decimal]
) -> None:
    settings.FINOPS_MAX_DECOMPRESSED_BYTES = 1 << 20
    row = csv_text([focus_row()]).splitlines()[1] + "\n"
    big = _gzip_of(tmp_path / "big.csv.gz", _focus_header().encode(), row.encode(), 2 << 20)

    error = _failed_naming(big, previous)

    assert "decompresses to more than 1,048,576 bytes (FINOPS_MAX_DECOMPRESSED_BYTES)" in error


def test_compression_ratio_is_bounded(tmp_path: Path) -> None:
    from billing_ingest.parsers.bounds import bounded_binary

    # 80 MiB of zeros gzip to about 80 KB: a ratio near 1,000, over the default 200.
    path = _gzip_of(tmp_path / "zeros.gz", b"", b"\0", 80 << 20)
    stream = bounded_binary(
        gzip.GzipFile(path, "rb"), packed_bytes=path.stat().st_size, file_label="zeros.gz"
    )
    with pytest.raises(ImportFormatError) as raised:
        list(iter(lambda: stream.read(1 << 20), b""))
    assert str(raised.value).startswith("file zeros.gz: ")
    assert "(FINOPS_MAX_COMPRESSION_RATIO)" in str(raised.value)


def test_zipped_cur_is_bounded(tmp_path: Path, settings: Settings) -> None:
    from billing_ingest.parsers.aws_cur import parse_aws_cur

    settings.FINOPS_MAX_DECOMPRESSED_BYTES = 1 << 20
    path = tmp_path / "cur.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        header, row = csv_text([legacy_row()]).splitlines()
        archive.writestr("cur.csv", header + "\n" + (row + "\n") * ((2 << 20) // len(row)))
    with pytest.raises(ImportFormatError) as raised:
        list(parse_aws_cur(path, file_label="cur.zip"))
    assert "FINOPS_MAX_DECOMPRESSED_BYTES" in str(raised.value)


@pytest.mark.django_db(transaction=True)
def test_sqlite_reads_the_file_before_the_write_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite a transaction that has read keeps every other writer (logins, the import's
    heartbeat) from committing: the parser must never run inside it."""
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL writers do not queue behind one transaction")
    inside: list[bool] = []

    def watched(path: Path, *, file_label: str) -> Iterator[Any]:
        for chunk in parse_focus(path, file_label=file_label, chunk_size=1):
            inside.append(connection.in_atomic_block)
            yield chunk

    monkeypatch.setattr(billing_service, "billing_parser", lambda name: watched)
    good = tmp_path / "good.csv"
    good.write_text(csv_text([focus_row(ResourceId=f"i-{i}") for i in range(3)]))

    _ingest(good)

    assert inside == [False, False, False]
    assert CostLineItem.objects.count() == 3


# --------------------------------------------------------------------------- item 9: columns


def _wide_csv(path: Path, columns: int = 100_000, delimiter: str = ",") -> Path:
    path.write_text(delimiter.join(f"c{i}" for i in range(columns)) + "\n1\n")
    return path


def _assert_too_wide(error: str, label: str) -> None:
    assert error.startswith(f"file {label}")
    assert "has 100,000 columns, more than 5,000 (FINOPS_MAX_COLUMNS)" in error


def test_billing_csv_columns_are_bounded(tmp_path: Path, previous: tuple[int, Decimal]) -> None:
    # A valid FOCUS header and row, then 99,983 more columns: about 1 MB.
    header, row = csv_text([focus_row()]).splitlines()
    extra = 100_000 - len(header.split(","))
    path = tmp_path / "wide.csv"
    path.write_text(
        header + "".join(f",x{i}" for i in range(extra)) + "\n" + row + "," * extra + "\n"
    )
    error = _failed_naming(path, previous)
    _assert_too_wide(error, "wide.csv, row 1")


def test_job_log_columns_are_bounded(tmp_path: Path) -> None:
    path = _wide_csv(tmp_path / "sacct.txt", delimiter="|")
    with pytest.raises(ImportFormatError) as raised:
        list(parse_sacct(path, file_label="sacct.txt", time_zone=UTC))
    _assert_too_wide(str(raised.value), "sacct.txt, row 1")


def test_utilisation_csv_columns_are_bounded(tmp_path: Path) -> None:
    path = _wide_csv(tmp_path / "util.csv")
    with pytest.raises(ImportFormatError) as raised:
        utilisation_import(path=path, cluster="hpc")
    _assert_too_wide(str(raised.value), str(path))
    assert ImportBatch.objects.get(kind=ImportBatch.Kind.UTILISATION).status == "failed"


def test_inference_csv_columns_are_bounded(tmp_path: Path) -> None:
    path = _wide_csv(tmp_path / "usage.csv")
    with pytest.raises(ImportFormatError) as raised:
        parse_usage_csv([path])
    _assert_too_wide(str(raised.value), str(path))


def test_uploaded_csv_columns_are_bounded(finance_client: Client, tmp_path: Path) -> None:
    wide = _wide_csv(tmp_path / "wide.csv").read_bytes()
    response = finance_client.post(
        reverse("web:imports-upload"),
        {"format": "billing:focus", "file": SimpleUploadedFile("wide.csv", wide)},
    )
    assert response.status_code == 302
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.FAILED
    _assert_too_wide(batch.error, "wide.csv, row 1")


# --------------------------------------------------------------------------- item 10: JSON depth


def _deep(depth: int = DEEP) -> str:
    return "[" * depth + "]" * depth


def test_depth_check() -> None:
    from billing_ingest.parsers.bounds import json_depth_exceeds, json_loads

    assert not json_depth_exceeds(_deep(64), 64)
    assert json_depth_exceeds(_deep(65), 64)
    # Brackets inside strings do not count; escaped quotes do not end a string.
    assert not json_depth_exceeds(json.dumps({"a": ["[[[[" * 100, 'x"[[[']}), 3)
    assert json_depth_exceeds('{"a": {"b": {"c": {"d": 1}}}}', 3)
    # Malformed text is left to json.loads to report.
    assert not json_depth_exceeds("[[[}", 64)
    with pytest.raises(ImportFormatError) as raised:
        json_loads("[" * DEEP, file_label="open.json")  # unclosed, and deep
    assert "FINOPS_MAX_JSON_DEPTH" in str(raised.value)


def test_budgets_api_answers_400_to_deep_json(finance_api: APIClient) -> None:
    body = '{"name": "deep", "amount": "10", "tags": ' + _deep() + "}"
    response = finance_api.post("/api/v1/budgets/", body, content_type="application/json")
    assert response.status_code == 400
    assert "FINOPS_MAX_JSON_DEPTH" in response.json()["detail"]


def test_kubernetes_upload_of_deep_json_fails_naming_the_file(finance_client: Client) -> None:
    upload = SimpleUploadedFile("pods.json", ('{"items": ' + _deep() + "}").encode())
    response = finance_client.post(
        reverse("web:imports-upload"),
        {"format": "jobs:kubernetes", "file": upload, "cluster": "k8s"},
    )
    assert response.status_code == 302
    batch = ImportBatch.objects.get()
    assert batch.status == ImportBatch.Status.FAILED
    assert batch.error.startswith(f"file {batch.file_name}: ")
    assert "nests deeper than 64 levels (FINOPS_MAX_JSON_DEPTH)" in batch.error


def test_opencost_and_query_range_json_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "cloudcost.json"
    path.write_text('{"data": ' + _deep() + "}")
    with pytest.raises(ImportFormatError) as raised:
        list(parse_opencost_cloudcost(path, file_label="cloudcost.json"))
    assert str(raised.value).startswith("file cloudcost.json: ")
    with pytest.raises(ImportFormatError) as raised:
        list(json_samples(_deep(), file_label="range.json", wanted={"x"}))
    assert str(raised.value).startswith("file range.json: ")


def test_bigquery_json_lines_are_bounded(tmp_path: Path) -> None:
    from billing_ingest.parsers.gcp_billing import parse_gcp_billing

    path = tmp_path / "export.json"
    path.write_text('{"cost": 1, "labels": ' + _deep() + "}\n")
    with pytest.raises(ImportFormatError) as raised:
        list(parse_gcp_billing(path, file_label="export.json"))
    assert str(raised.value).startswith("file export.json, row 1: ")
    assert "FINOPS_MAX_JSON_DEPTH" in str(raised.value)


def test_ordinary_files_still_read(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join(FIRST_DUMP) + "\n")
    assert sum(len(chunk) for chunk in parse_sacct(path, file_label="sacct.txt", time_zone=UTC)) > 0
