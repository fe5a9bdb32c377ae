"""The ledger's rows sent down COPY (ledger.stage_write, as a part stages them) read back
as exactly the values of their tuples (ledger_rows.ledger_values): whatever the names (COPY's
own delimiters and escapes included), amounts and GPU-seconds."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finops.attribution.inputs.jobs import JobMeta
from finops.attribution.inputs.month import Dims, Inputs
from finops.attribution.ledger import staging
from finops.attribution.ledger import writer as ledger
from finops.attribution.ledger.rollup_sums import Ledger
from finops.attribution.ledger.rows import ledger_names, ledger_values
from finops.attribution.models import Category
from finops.core.money import MONEY_DIGITS

MONTH = dt.date(2025, 1, 1)
# The largest amount the ledger's money columns hold, in units.
MAX_UNITS = 10**MONEY_DIGITS - 1
# Text as bills and logs bring it: COPY's own delimiters and escapes included.
NAMES = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8
) | st.sampled_from(["a\tb", "c\nd", "e\\f", "g\rh", "\\N", ""])
UNITS = st.integers(min_value=-MAX_UNITS, max_value=MAX_UNITS)


@st.composite
def ledgers(draw: st.DrawFn) -> tuple[Inputs, Ledger]:
    dims: list[Dims] = [
        (draw(NAMES), draw(NAMES), draw(NAMES), draw(NAMES), draw(NAMES), "USD",
         draw(st.integers(1, 10**6)), draw(NAMES), draw(NAMES))
        for _ in range(draw(st.integers(1, 3)))
    ]  # fmt: skip
    jobs = {
        job_id: JobMeta("c", draw(NAMES), "COMPLETED", dt.datetime(2025, 1, 1, tzinfo=dt.UTC), None)
        for job_id in draw(st.lists(st.integers(1, 10**9), max_size=4, unique=True))
    }
    rows: Ledger = {}
    for _ in range(draw(st.integers(1, 12))):
        job_id = draw(st.sampled_from([None, *jobs]))
        key = (
            draw(st.integers(0, len(dims) - 1)), draw(st.integers(20089, 20119)),
            draw(st.sampled_from(Category.values)), draw(st.none() | st.integers(1, 10**6)),
            job_id, draw(NAMES),
        )  # fmt: skip
        seconds = draw(st.decimals(min_value=0, max_value=10**12, places=6))
        rows[key] = [draw(UNITS), seconds, draw(UNITS), draw(UNITS)]
    return Inputs(dims=dims, job_meta=jobs), rows


def _read(table: str) -> list[tuple[Any, ...]]:
    columns = ", ".join(f'"{name}"' for name in ledger_names())
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {columns} FROM "{table}"')
        return _canonical(cursor.fetchall())


def _canonical(rows: Any) -> list[tuple[Any, ...]]:
    """The rows in one order, Decimals by value (one read back carries its column's scale)."""
    return sorted(
        (tuple(v.normalize() if isinstance(v, Decimal) else v for v in row) for row in rows),
        key=repr,
    )


@pytest.mark.django_db
def test_rows_copied_read_back_as_their_value_tuples() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("staging tables are PostgreSQL's (SQLite takes the value tuples)")
    table = f"{staging.PREFIX}test_rows"

    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(ledgers())
    def written_as_given(month_rows: tuple[Inputs, Ledger]) -> None:
        inputs, rows = month_rows
        ledger.stage_write(table, MONTH, inputs, rows)
        assert _read(table) == _canonical(ledger_values(MONTH, inputs, rows))

    written_as_given()
