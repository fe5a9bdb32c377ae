"""The shared public AWS CUR samples: the aws-cur parser reads every one, and its row count and
BilledCost / EffectiveCost totals equal a direct sum over the file computed here with csv and
Decimal; the same holds after `ingest_billing --format aws-cur` loads them into the ledger."""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers import billing_parser
from finops.core.money import MONEY_QUANTUM

SAMPLES = [
    "legacy_cur_anonymized_1281rows.csv",
    "legacy_cur_koku_savingsplan_covered_usage.csv",
    "legacy_cur_koku_test_cur.csv",
]


def _cell(row: dict[str, str | None], name: str) -> str:
    # AWS spells some legacy headers two ways (savingsPlan/SavingsPlanARN vs ...Arn).
    for key, value in row.items():
        if key is not None and key.lower() == name.lower():
            return (value or "").strip()
    return ""


def _money(row: dict[str, str | None], name: str) -> Decimal:
    # The ledger keeps MONEY_PLACES decimals: each cell is rounded to that before summing.
    return Decimal(_cell(row, name) or "0").quantize(MONEY_QUANTUM)


def _amortised(row: dict[str, str | None]) -> Decimal:
    """AWS amortised cost by line item type (shared/samples/README.md, format facts)."""
    kind = _cell(row, "lineItem/LineItemType")
    if kind == "SavingsPlanCoveredUsage":
        return _money(row, "savingsPlan/SavingsPlanEffectiveCost")
    if kind == "DiscountedUsage":
        return _money(row, "reservation/EffectiveCost")
    if kind == "SavingsPlanRecurringFee":
        return _money(row, "savingsPlan/TotalCommitmentToDate") - _money(
            row, "savingsPlan/UsedCommitment"
        )
    if kind == "RIFee":
        return _money(row, "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod") + _money(
            row, "reservation/UnusedRecurringFee"
        )
    if kind in ("SavingsPlanNegation", "SavingsPlanUpfrontFee"):
        return Decimal(0)
    if kind == "Fee" and _cell(row, "reservation/ReservationARN"):
        return Decimal(0)
    return _money(row, "lineItem/UnblendedCost")


def _expected(path: Path) -> tuple[int, dict[str, tuple[Decimal, Decimal]]]:
    totals: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    rows = 0
    with path.open(newline="", encoding="utf-8-sig") as handle:
        for row in csv.DictReader(handle):
            rows += 1
            entry = totals[_cell(row, "lineItem/CurrencyCode")]
            entry[0] += _money(row, "lineItem/UnblendedCost")
            entry[1] += _amortised(row)
    return rows, {currency: (v[0], v[1]) for currency, v in totals.items()}


def _sums(items: Iterable[Mapping[str, Any]]) -> dict[str, tuple[Decimal, Decimal]]:
    totals: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for item in items:
        entry = totals[item["billing_currency"]]
        entry[0] += item["billed_cost"]
        entry[1] += item["effective_cost"]
    return {currency: (v[0], v[1]) for currency, v in totals.items()}


@pytest.mark.parametrize("name", SAMPLES)
def test_parser_totals_match_a_direct_sum(samples_dir: Path, name: str) -> None:
    path = samples_dir / "aws" / name
    expected_rows, expected = _expected(path)

    items = [item for chunk in billing_parser("aws-cur")(path, file_label=name) for item in chunk]

    assert len(items) == expected_rows
    assert _sums(items) == expected
    assert {item["provider_name"] for item in items} == {"AWS"}


def test_every_sample_file_is_covered(samples_dir: Path) -> None:
    # A sample added later must be added to SAMPLES (and so be read by the parser).
    assert sorted(p.name for p in (samples_dir / "aws").glob("*.csv")) == sorted(SAMPLES)


def test_savings_plan_sample_amortises_onto_covered_usage(samples_dir: Path) -> None:
    path = samples_dir / "aws" / "legacy_cur_koku_savingsplan_covered_usage.csv"
    items = [
        item for chunk in billing_parser("aws-cur")(path, file_label=path.name) for item in chunk
    ]
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))

    for item, row in zip(items, rows, strict=True):
        assert item["charge_category"] == "Usage"
        assert item["pricing_category"] == "Committed"
        # koku's synthetic rows leave the ARN blank; FOCUS: no commitment id, no status.
        arn = _cell(row, "savingsPlan/SavingsPlanArn")
        assert item["commitment_discount_id"] == arn
        assert item["commitment_discount_status"] == ("Used" if arn else "")
        assert item["billed_cost"] == _money(row, "lineItem/UnblendedCost")
        assert item["effective_cost"] == _money(row, "savingsPlan/SavingsPlanEffectiveCost")
        assert item["x_instance_type"] == _cell(row, "product/instanceType")


@pytest.mark.django_db
@pytest.mark.parametrize("name", SAMPLES)
def test_ingest_billing_loads_the_sample(samples_dir: Path, name: str) -> None:
    path = samples_dir / "aws" / name
    expected_rows, expected = _expected(path)

    call_command("ingest_billing", "--format", "aws-cur", str(path))

    batch = ImportBatch.objects.get(format="aws-cur")
    assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
    assert batch.row_count == expected_rows
    # Summed row by row in Python: a database SUM over decimals may go through floats (SQLite).
    loaded = CostLineItem.objects.filter(batch=batch).values(
        "billing_currency", "billed_cost", "effective_cost"
    )
    assert len(loaded) == expected_rows
    assert _sums([dict(row) for row in loaded]) == expected
    assert {
        currency: (Decimal(v["billed"]), Decimal(v["effective"]))
        for currency, v in batch.currency_totals.items()
    } == expected
