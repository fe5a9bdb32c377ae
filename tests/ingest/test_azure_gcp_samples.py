"""Every Azure and GCP sample in ../shared/samples parses, and its totals equal a direct sum.

The expectations are computed here from the raw file with csv + Decimal, independently of the
parsers: Azure's cost column summed; GCP's cost plus credit amounts for both BilledCost and
EffectiveCost (credits read here with ast.literal_eval / json, not with the parser's reader).
Parsers quantize each money value to MONEY_QUANTUM, so parsed totals equal the sum of per-row
quantized values exactly and the raw sum to within half a quantum per value.
"""

from __future__ import annotations

import ast
import csv
import json
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.parsers import billing_parser
from finops.core.money import MONEY_QUANTUM
from finops.core.months import month_format

HALF_QUANTUM = MONEY_QUANTUM / 2


def q(value: Decimal) -> Decimal:
    return value.quantize(MONEY_QUANTUM, rounding=ROUND_HALF_EVEN)


@dataclass
class Expected:
    rows: int = 0
    values: int = 0  # money values summed (for the rounding tolerance)
    billed_raw: Decimal = Decimal(0)
    effective_raw: Decimal = Decimal(0)
    billed_q: Decimal = Decimal(0)
    effective_q: Decimal = Decimal(0)
    currencies: set[str] = field(default_factory=set)
    periods: set[date] = field(default_factory=set)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def pick(row: dict[str, str], *names: str) -> str:
    lowered = {key.lower(): value for key, value in row.items()}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    raise KeyError(names)


def azure_period(text: str) -> date:
    if "/" in text:  # EA: MM/DD/YYYY
        month, _, year = text.split("/")
        return date(int(year), int(month), 1)
    return date(int(text[:4]), int(text[5:7]), 1)


def expected_azure(path: Path) -> Expected:
    expected = Expected()
    for row in read_csv(path):
        cost = Decimal(pick(row, "CostInBillingCurrency", "Cost"))
        expected.rows += 1
        expected.values += 1
        expected.billed_raw += cost
        expected.effective_raw += cost
        expected.billed_q += q(cost)
        expected.effective_q += q(cost)
        expected.currencies.add(pick(row, "BillingCurrency", "BillingCurrencyCode"))
        expected.periods.add(azure_period(pick(row, "BillingPeriodStartDate")))
    return expected


def credit_amounts(text: str) -> list[Decimal]:
    try:
        credits = json.loads(text)
    except json.JSONDecodeError:
        credits = ast.literal_eval(text)
    return [Decimal(repr(credit["amount"])) for credit in credits]


def expected_gcp(path: Path) -> Expected:
    expected = Expected()
    for row in read_csv(path):
        cost = Decimal(row["cost"])
        amounts = credit_amounts(row["credits"])
        expected.rows += 1
        expected.values += 1 + len(amounts)
        # Google invoices the net: BilledCost and EffectiveCost are both cost + credits.
        expected.billed_raw += cost + sum(amounts, Decimal(0))
        expected.effective_raw += cost + sum(amounts, Decimal(0))
        expected.billed_q += q(cost) + sum((q(a) for a in amounts), Decimal(0))
        expected.effective_q += q(cost) + sum((q(a) for a in amounts), Decimal(0))
        expected.currencies.add(row["currency"])
        month = row["invoice.month"]
        expected.periods.add(date(int(month[:4]), int(month[4:]), 1))
    return expected


PROVIDERS = [
    pytest.param("azure", "azure", expected_azure, id="azure"),
    pytest.param("gcp", "gcp-bigquery", expected_gcp, id="gcp"),
]


def sample_files(samples_dir: Path, folder: str) -> list[Path]:
    files = sorted((samples_dir / folder).glob("*.csv"))
    assert files, f"no CSV samples in {samples_dir / folder}"
    return files


def assert_totals(expected: Expected, *, rows: int, billed: Decimal, effective: Decimal) -> None:
    assert rows == expected.rows
    assert billed == expected.billed_q
    assert effective == expected.effective_q
    tolerance = HALF_QUANTUM * expected.values
    assert abs(billed - expected.billed_raw) <= tolerance
    assert abs(effective - expected.effective_raw) <= tolerance


@pytest.mark.parametrize(("folder", "fmt", "compute"), PROVIDERS)
def test_parser_totals_equal_a_direct_sum(
    samples_dir: Path, folder: str, fmt: str, compute: Any
) -> None:
    parse = billing_parser(fmt)
    for path in sample_files(samples_dir, folder):
        expected = compute(path)
        items = [item for chunk in parse(path, file_label=path.name) for item in chunk]
        assert_totals(
            expected,
            rows=len(items),
            billed=sum((i["billed_cost"] for i in items), Decimal(0)),
            effective=sum((i["effective_cost"] for i in items), Decimal(0)),
        )
        assert {i["billing_currency"] for i in items} == expected.currencies
        assert {i["billing_period"] for i in items} == expected.periods
        for item in items:
            assert item["charge_period_start"].tzinfo is not None
            assert item["charge_period_end"] > item["charge_period_start"]
            assert item["billing_period"] == item["billing_period_start"].date().replace(day=1)


@pytest.mark.django_db
@pytest.mark.parametrize(("folder", "fmt", "compute"), PROVIDERS)
def test_ingest_billing_loads_the_same_totals(
    samples_dir: Path, folder: str, fmt: str, compute: Any
) -> None:
    for path in sample_files(samples_dir, folder):
        expected = compute(path)
        call_command("ingest_billing", "--format", fmt, str(path))
        batch = ImportBatch.objects.get(file_name=str(path.resolve()))
        assert batch.status == ImportBatch.Status.SUCCEEDED, batch.error
        # Summed in Python: SQLite's SUM over a decimal column goes through floats.
        values = list(
            CostLineItem.objects.filter(batch=batch).values_list("billed_cost", "effective_cost")
        )
        assert_totals(
            expected,
            rows=len(values),
            billed=sum((billed for billed, _ in values), Decimal(0)),
            effective=sum((effective for _, effective in values), Decimal(0)),
        )
        assert batch.row_count == expected.rows
        assert set(batch.currency_totals) == expected.currencies
        assert batch.billing_periods == sorted(month_format(p) for p in expected.periods)


@pytest.mark.parametrize(("folder", "fmt"), [("azure", "azure"), ("gcp", "gcp-bigquery")])
def test_account_names_are_kept_as_the_file_gives_them(
    samples_dir: Path, folder: str, fmt: str
) -> None:
    """Azure's BillingAccountName and SubscriptionName, GCP's project.name: stored beside the
    ids (the FOCUS export's BillingAccountName and SubAccountName), never replaced by them."""
    parse = billing_parser(fmt)
    names = ("BillingAccountName", "SubscriptionName") if fmt == "azure" else (None, "project.name")
    for path in sample_files(samples_dir, folder):
        rows = read_csv(path)
        items = [item for chunk in parse(path, file_label=path.name) for item in chunk]
        account, sub = names
        expected_sub = [pick(row, sub) for row in rows]
        assert [item["sub_account_name"] for item in items] == expected_sub, path.name
        assert any(expected_sub), path.name
        expected_account = [pick(row, account) if account else "" for row in rows]
        assert [item["billing_account_name"] for item in items] == expected_account, path.name
