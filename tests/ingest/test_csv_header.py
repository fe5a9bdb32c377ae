"""The header row of every CSV billing format is read by one helper (parsers.values.csv_header):
an empty file, an unreadable first row or a bad byte in a column name fails naming the file, row
1 and the column, as each parser said before it was shared."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from billing_ingest.parsers.bounds import csv_reader
from billing_ingest.parsers.values import csv_header, open_text
from finops.core.errors import ImportFormatError


def _header(path: Path, *, compressed: bool = False) -> list[str]:
    with open_text(path, compressed=compressed, file_label="bill.csv") as handle:
        return csv_header(csv_reader(handle, file_label="bill.csv"), file_label="bill.csv")


def test_the_header_row_is_returned_as_written(tmp_path: Path) -> None:
    path = tmp_path / "bill.csv"
    path.write_text("BilledCost,EffectiveCost\n1,2\n")
    assert _header(path) == ["BilledCost", "EffectiveCost"]


def test_an_empty_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bill.csv"
    path.write_text("")
    with pytest.raises(ImportFormatError) as caught:
        _header(path)
    assert (caught.value.file, caught.value.row) == ("bill.csv", None)
    assert caught.value.detail == "file is empty (no header row)"


def test_a_truncated_gzip_fails_at_row_1(tmp_path: Path) -> None:
    path = tmp_path / "bill.csv.gz"
    path.write_bytes(gzip.compress(b"BilledCost,EffectiveCost\n" * 50)[:30])
    with pytest.raises(ImportFormatError) as caught:
        _header(path, compressed=True)
    assert (caught.value.file, caught.value.row) == ("bill.csv", 1)
    assert caught.value.detail.startswith("cannot read the header row (")


def test_a_nul_in_a_column_name_names_row_1_and_the_column(tmp_path: Path) -> None:
    path = tmp_path / "bill.csv"
    path.write_bytes(b"BilledCost,Effective\x00Cost\n1,2\n")
    with pytest.raises(ImportFormatError) as caught:
        _header(path)
    assert (caught.value.file, caught.value.row) == ("bill.csv", 1)
    assert caught.value.column is not None
