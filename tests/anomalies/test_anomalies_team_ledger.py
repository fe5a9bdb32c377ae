"""Detection reads the ledger of the kept events' teams once (series.team_ledger) and takes both
their cells (the drivers by endpoint, run, service) and their rows (traced to line items) from
that one read. Those must be exactly what the per-event reads gave (series.team_cells: summed by
the database; series.team_rows): the risk is in the sums, rows in the reporting currency being
summed in SQL by team_cells and group by group here, and rows in other currencies converted
(or left out with no rate) in both."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from finops.anomalies.series import (
    LedgerCell,
    ledger_load,
    team_cells,
    team_ledger,
    team_rows,
)
from finops.currency.models import FxRate
from finops.org.models import Team
from tests import anomaly_ledger as ledger

pytestmark = pytest.mark.django_db

DAY = ledger.START + dt.timedelta(days=1)
# run-a's cost on DAY as stored (the ledger keeps 12 places): 1000.123456789012 x 1.03.
RUN_A = Decimal("1030.127160492682")
LAST = ledger.START + dt.timedelta(days=ledger.DAYS - 1)


def _scenario(team: Team) -> Team:
    """The 40-day run of tests/anomaly_ledger.py; on DAY also 100 EUR of run-a (at 1.1: 110
    USD), two rows of run-b of 0.000000000001 and 2.5 USD (one group each: other nodes), 7 GBP
    (no rate: left out everywhere); another team's row on DAY that no read of `team` sees."""
    other = Team.objects.create(slug="other", name="Other")
    ledger.build(team, spike=None)
    FxRate.objects.create(date=ledger.START, from_currency="EUR", to_currency="USD",
                          rate=Decimal("1.1"))  # fmt: skip
    ledger.row(team, DAY, Decimal("100"), run_id="run-a", billing_currency="EUR")
    ledger.row(team, DAY, Decimal("0.000000000001"), run_id="run-b", node="n1")
    ledger.row(team, DAY, Decimal("2.5"), run_id="run-b", node="n2")
    ledger.row(team, DAY, Decimal("7"), run_id="run-a", billing_currency="GBP")
    ledger.row(other, DAY, Decimal("50"), run_id="run-a")
    return other


def _cell(team: Team, run: str) -> LedgerCell:
    return LedgerCell(team.pk, "AWS", "Amazon EC2", ("run", run))


def test_cells_from_the_one_read_are_the_databases_sums(team: Team) -> None:
    other = _scenario(team)
    data = ledger_load(first_day=ledger.START, last_day=LAST)
    read = team_ledger(data, {team.pk, other.pk}, ledger.START, LAST)
    cells = read.cells(team.pk, DAY, DAY)
    # Hand-computed: run-a's day and 100 EUR x 1.1; GBP has no rate.
    assert cells[DAY][_cell(team, "run-a")] == Decimal("1140.127160492682")
    assert cells[DAY][_cell(team, "run-b")] == Decimal("2.500000000001")
    assert read.cells(other.pk, DAY, DAY) == {DAY: {_cell(other, "run-a"): Decimal("50")}}
    for first, last in [(DAY, DAY), (ledger.START, LAST), (DAY, DAY + dt.timedelta(days=9))]:
        assert read.cells(team.pk, first, last) == team_cells(data, team.pk, first, last)
    assert ("GBP", DAY) in data.missing


def test_rows_from_the_one_read_are_the_teams_rows(team: Team) -> None:
    other = _scenario(team)
    data = ledger_load(first_day=ledger.START, last_day=LAST)
    read = team_ledger(data, {team.pk, other.pk}, ledger.START, LAST)

    def key(row: object) -> str:
        return repr(row)

    for ids, first, last in [({team.pk}, DAY, DAY), ({team.pk, other.pk}, ledger.START, LAST)]:
        rows = sorted(read.rows(ids, first, last), key=key)
        assert rows == sorted(team_rows(data, ids, first, last), key=key)
    on_day = [r for r in read.rows({team.pk}, DAY, DAY)]
    # run-a USD, run-a EUR (110 USD), run-b on n1 and on n2; not the GBP row.
    assert sorted(r.amount for r in on_day) == sorted(
        [RUN_A, Decimal("110"), Decimal("0.000000000001"), Decimal("2.5")]
    )  # fmt: skip
    assert read.covers({team.pk}, DAY, LAST)
    assert not read.covers({team.pk}, ledger.START - dt.timedelta(days=1), LAST)
