"""The columnar (pyarrow) CSV path builds exactly the rows the per-row path builds.

Each file is parsed twice: as shipped (columnar where it can) and with the columnar reader
forced to fall back, so every row comes from the per-row builders. The two must be equal row
for row, key for key: Decimal money, UTC datetimes, tags dicts, chunk boundaries.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from billing_ingest.parsers import aws_cur, columnar, focus
from billing_ingest.parsers.columnar import FallBack, LineItemTable

# A parser chunk: a list of row dicts, or a LineItemTable on the columnar path.
Chunk = Any
BENCH = Path(__file__).resolve().parents[2] / "bench" / "ingest_files.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ingest_files", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ingest_files"] = module
    spec.loader.exec_module(module)
    return module


def _no_columnar(*args: object, **kwargs: object) -> Iterator[object]:
    raise FallBack("forced")
    yield  # pragma: no cover


def both_paths(
    monkeypatch: pytest.MonkeyPatch,
    parse: Callable[..., Iterator[Chunk]],
    path: Path,
    chunk_size: int,
) -> tuple[list[Chunk], list[Chunk]]:
    fast = list(parse(path, file_label=path.name, chunk_size=chunk_size))
    with monkeypatch.context() as patch:
        # Every CSV parser's fast path reads through columnar.arrow_csv_tables.
        patch.setattr(columnar, "arrow_csv_batches", _no_columnar)
        slow = list(parse(path, file_label=path.name, chunk_size=chunk_size))
    return fast, slow


def assert_same(fast: list[Chunk], slow: list[Chunk]) -> None:
    assert [len(chunk) for chunk in fast] == [len(chunk) for chunk in slow]
    fast_rows = [row for chunk in fast for row in chunk]
    slow_rows = [row for chunk in slow for row in chunk]
    assert len(fast_rows) == len(slow_rows) > 0
    for got, want in zip(fast_rows, slow_rows, strict=True):
        assert got == want
        # Same scale too (equality of Decimals ignores it), and UTC-aware datetimes.
        for key, value in want.items():
            assert str(got[key]) == str(value), key


@pytest.mark.parametrize("kind", ["aws-cur", "focus"])
def test_generated_files_take_the_columnar_path_and_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    bench = _bench()
    path = tmp_path / f"{kind}.csv"
    if kind == "aws-cur":
        bench.write_csv(path, bench.CUR_COLUMNS, bench.cur_rows(700, 7), 700)
        parse = aws_cur.parse_aws_cur
    else:
        bench.write_csv(path, bench.FOCUS_COLUMNS, bench.focus_rows(700, 7), 700)
        parse = focus.parse_focus
    fast, slow = both_paths(monkeypatch, parse, path, 300)
    assert all(isinstance(chunk, LineItemTable) for chunk in fast)
    assert not any(isinstance(chunk, LineItemTable) for chunk in slow)
    assert_same(fast, slow)


@pytest.mark.parametrize(
    "name",
    [
        "aws/legacy_cur_anonymized_1281rows.csv",
        "aws/legacy_cur_koku_savingsplan_covered_usage.csv",
        "aws/legacy_cur_koku_test_cur.csv",
        "focus/focus_1.0_sample_1000rows_aws_azure_oci.csv",
    ],
)
def test_shared_samples_match(
    samples_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    path = samples_dir / name
    if name.startswith("aws/"):
        fast, slow = both_paths(monkeypatch, aws_cur.parse_aws_cur, path, 400)
    else:
        fast, slow = both_paths(monkeypatch, focus.parse_focus, path, 400)
    assert_same(fast, slow)


BILLING_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "billing"


@pytest.mark.parametrize(
    ("name", "parse"),
    [
        # CUR 2.0 with the accounts' names; FOCUS 1.0 with names and Oracle's units.
        ("aws-cur2-nok-2025-06.csv", aws_cur.parse_aws_cur),
        ("oci-focus-1.0-2025-08.csv", focus.parse_focus),
    ],
)
def test_hand_made_fixtures_match(
    monkeypatch: pytest.MonkeyPatch, name: str, parse: Callable[..., Iterator[Chunk]]
) -> None:
    fast, slow = both_paths(monkeypatch, parse, BILLING_FIXTURES / name, 2)
    assert all(isinstance(chunk, LineItemTable) for chunk in fast)
    assert_same(fast, slow)
    names = {(row["billing_account_name"], row["sub_account_name"]) for c in fast for row in c}
    assert all(account and sub for account, sub in names)


def test_a_value_only_the_per_row_path_reads_falls_back_mid_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = _bench()
    path = tmp_path / "focus.csv"
    rows = list(bench.focus_rows(50, 3))
    rows[37]["BilledCost"] = "1.0000000000005"  # 13 places: rounded half-even, not cast
    rows[41]["ListCost"] = "NULL"
    bench.write_csv(path, bench.FOCUS_COLUMNS, iter(rows), 50)
    fast, slow = both_paths(monkeypatch, focus.parse_focus, path, 20)
    assert_same(fast, slow)
    assert fast[1][17]["billed_cost"] == slow[1][17]["billed_cost"]
