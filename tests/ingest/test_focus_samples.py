"""Every shared FOCUS sample imports, and its totals equal a direct sum over the file.

The expectations are computed here from the file itself (csv module + Decimal, pyarrow for
Parquet), independently of the parser, so a parsing or loading error shows up as a mismatch.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers.focus import REQUIRED_COLUMNS
from tests.conftest import SAMPLES_DIR

pytestmark = pytest.mark.django_db

FOCUS_DIR = SAMPLES_DIR / "focus"
CSV_SAMPLES = sorted(str(p.relative_to(FOCUS_DIR)) for p in FOCUS_DIR.rglob("*.csv"))
PARQUET_SAMPLES = sorted(str(p.relative_to(FOCUS_DIR)) for p in FOCUS_DIR.rglob("*.parquet"))

Totals = dict[str, dict[str, Decimal]]


def is_null(text: str | None) -> bool:
    return text is None or text.strip() == "" or text.strip().upper() == "NULL"


def direct_csv_totals(path: Path) -> tuple[int, Totals]:
    rows = 0
    totals: Totals = defaultdict(lambda: {"billed": Decimal(0), "effective": Decimal(0)})
    with path.open(newline="", encoding="utf-8-sig") as handle:
        for record in csv.DictReader(handle):  # DictReader skips blank lines, as FOCUS readers do
            rows += 1
            currency = record.get("BillingCurrency") or settings.FINOPS_DEFAULT_CURRENCY
            totals[currency]["billed"] += Decimal(record["BilledCost"])
            totals[currency]["effective"] += Decimal(record["EffectiveCost"])
    return rows, dict(totals)


def stored_totals(batch: ImportBatch) -> Totals:
    # Summed in Python: SQLite's SUM() over decimals goes through floats.
    totals: Totals = defaultdict(lambda: {"billed": Decimal(0), "effective": Decimal(0)})
    for currency, billed, effective in CostLineItem.objects.filter(batch=batch).values_list(
        "billing_currency", "billed_cost", "effective_cost"
    ):
        totals[currency]["billed"] += billed
        totals[currency]["effective"] += effective
    return dict(totals)


def ingest(path: Path) -> ImportBatch:
    call_command("ingest_billing", "--format", "focus", str(path), stdout=io.StringIO())
    return ImportBatch.objects.get(file_name=str(path.resolve()))


def assert_matches(batch: ImportBatch, rows: int, expected: Totals) -> None:
    assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
    assert batch.row_count == rows
    assert CostLineItem.objects.filter(batch=batch).count() == rows
    assert stored_totals(batch) == expected
    recorded = {
        currency: {"billed": Decimal(t["billed"]), "effective": Decimal(t["effective"])}
        for currency, t in batch.currency_totals.items()
    }
    assert recorded == expected


def test_samples_were_found(samples_dir: Path) -> None:
    assert CSV_SAMPLES, "no FOCUS CSV samples under ../shared/samples/focus"
    assert any(s.startswith("spec_1.2_examples") for s in CSV_SAMPLES)


@pytest.mark.parametrize("relative", CSV_SAMPLES)
def test_csv_sample_totals_match_a_direct_sum(samples_dir: Path, relative: str) -> None:
    path = samples_dir / "focus" / relative
    rows, expected = direct_csv_totals(path)
    batch = ingest(path)
    assert_matches(batch, rows, expected)


@pytest.mark.parametrize("relative", PARQUET_SAMPLES)
def test_parquet_sample_imports_or_fails_naming_missing_columns(
    samples_dir: Path, relative: str
) -> None:
    path = samples_dir / "focus" / relative
    table = pq.read_table(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        # focus_validator's sample.parquet is a smoke file with three non-FOCUS columns.
        with pytest.raises(CommandError) as raised:
            ingest(path)
        batch = ImportBatch.objects.get(file_name=str(path.resolve()))
        assert batch.status == ImportBatch.Status.FAILED
        for column in missing:
            assert column in batch.error
            assert column in str(raised.value)
        assert f"file {path.name}" in batch.error
        assert not CostLineItem.objects.exists()
        return
    totals: Totals = defaultdict(lambda: {"billed": Decimal(0), "effective": Decimal(0)})
    records = table.to_pylist()
    for record in records:
        currency = record.get("BillingCurrency") or settings.FINOPS_DEFAULT_CURRENCY
        totals[currency]["billed"] += Decimal(str(record["BilledCost"]))
        totals[currency]["effective"] += Decimal(str(record["EffectiveCost"]))
    assert_matches(ingest(path), len(records), dict(totals))
