"""The bills of the month-close tests (September and October 2025, teams vision and speech),
shared with the chat channel tests of a close."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from django.core.management import call_command

COLUMNS = [
    "BillingPeriodStart",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ResourceId",
    "BilledCost",
    "EffectiveCost",
    "BillingCurrency",
    "Tags",
]


def write_focus(path: Path, month: str, rows: list[tuple[str, str, str]]) -> Path:
    """rows: (resource id, team tag, cost) in `month` "YYYY-MM", USD."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for resource, team, cost in rows:
            start = f"{month}-02T00:00:00Z"
            writer.writerow(
                [f"{month}-01T00:00:00Z", start, f"{month}-02T01:00:00Z", resource, cost, cost,
                 "USD", f'{{"team": "{team}"}}']
            )  # fmt: skip
    return path


def ingest(path: Path) -> None:
    # One source for every file: a new file for a month the source already delivered is a
    # restatement of that month (it replaces the month's rows), and the months are attributed.
    call_command(
        "ingest_billing", "--format", "focus", str(path), "--source", "bill", stdout=io.StringIO()
    )


def close_bills(tmp_path: Path) -> Path:
    """The close tests' bills (the `bills` fixture of tests/conftest.py): teams vision and
    speech must exist."""
    ingest(write_focus(tmp_path / "sept.csv", "2025-09", [("r1", "vision", "100.00"),
                                                         ("r2", "speech", "50.00")]))  # fmt: skip
    ingest(write_focus(tmp_path / "oct.csv", "2025-10", [("r3", "vision", "40.00")]))
    return tmp_path
