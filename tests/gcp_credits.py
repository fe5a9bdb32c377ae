"""The hand-made GCP billing export with credits (fixtures/scenarios/gcp-bigquery-csv-slurm),
read here without the parser: rows by csv, credits' types and names by ast.literal_eval, and
their amounts as the Decimal of the file's own digits (-5e-06 -> Decimal("-0.000005"))."""

from __future__ import annotations

import ast
import csv
import re
from decimal import Decimal
from pathlib import Path

CREDITS_CSV = (
    Path(__file__).resolve().parent.parent
    / "fixtures"
    / "scenarios"
    / "gcp-bigquery-csv-slurm"
    / "bigquery-export-2025-07.csv"
)
CREDITS_MONTH = "2025-07"
_AMOUNT_RE = re.compile(r"'amount': (-?[0-9.]+(?:e[-+]?[0-9]+)?)")


def credit_rows() -> list[dict[str, str]]:
    with CREDITS_CSV.open(newline="") as handle:
        return list(csv.DictReader(handle))


def file_credits(row: dict[str, str]) -> list[tuple[str, str, Decimal]]:
    """(type, name, amount) of each credit of a row, in the file's order."""
    listed = ast.literal_eval(row["credits"])
    amounts = [Decimal(text) for text in _AMOUNT_RE.findall(row["credits"])]
    assert len(listed) == len(amounts)
    return [(c["type"], c["name"], a) for c, a in zip(listed, amounts, strict=True)]


def net_cost(row: dict[str, str]) -> Decimal:
    """What Google invoices for the row: cost + credits."""
    return Decimal(row["cost"]) + sum((a for _, _, a in file_credits(row)), Decimal(0))
