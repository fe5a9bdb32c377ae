"""The ledger's rows as the integer columns copy_columns.ledger_copy sends PostgreSQL: every
value comes back from its columns exactly (names by index, ids with -1 for None, money and
GPU-seconds as whole and fractional parts), credits and amounts past int64 included. The rows
written and read back on PostgreSQL are tests/attribution/test_ledger_rows.py's."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np

from finops.attribution.inputs.jobs import JobMeta
from finops.attribution.inputs.month import Dims, Inputs
from finops.attribution.ledger.copy_columns import ledger_columns
from finops.attribution.ledger.rollup_sums import Ledger

DIMS: list[Dims] = [
    ("AWS", "acct-0", "", "Amazon EC2", "Standard", "USD", 3, "on_demand", "bill"),
    ("AWS", "acct-1", "sub", "Amazon EC2", "Committed", "USD", 3, "commitment", "catalogue"),
]
START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
JOBS = {
    41: JobMeta("c1", "run-a", "COMPLETED", START, None),
    42: JobMeta("c1", "", "FAILED", START, None),
}
# 98.32 USD in 10^-12 units; a credit; an amount of 10^7 USD + 1 unit (past int64 in units).
BIG = 10**19 + 1
LEDGER: Ledger = {
    (0, 20089, "training", 7, 41, "gpu-a00001"): [
        98_320_000_000_000, Decimal("1800.000000"), 137_612_300_000_000, 98_320_000_000_000,
    ],
    (1, 20090, "idle", None, None, "gpu-a00001"): [-5, Decimal(0), -7, -5],
    (1, 20090, "training", 8, 42, ""): [BIG, Decimal("0.000001"), BIG + 1, -BIG],
}  # fmt: skip


def _value(high: np.int64, low: np.int64, scale: int) -> int:
    return int(high) * scale + int(low)


def test_columns_give_back_every_value() -> None:
    columns, names = ledger_columns(Inputs(dims=DIMS, job_meta=JOBS), LEDGER)
    texts = names["text"]
    assert names["dims"] == DIMS
    rows = []
    for i in range(len(columns[0])):
        c = [column[i] for column in columns]
        rows.append(
            (
                (int(c[0]), int(c[1]), texts[c[2]], None if c[3] == -1 else int(c[3]),
                 None if c[4] == -1 else int(c[4]), texts[c[6]]),
                texts[c[5]],
                [_value(c[7], c[8], 10**12), Decimal(_value(c[9], c[10], 10**6)).scaleb(-6),
                 _value(c[11], c[12], 10**12), _value(c[13], c[14], 10**12)],
            )
        )  # fmt: skip
    assert [(key, values) for key, _, values in rows] == list(LEDGER.items())
    # Run ids from the jobs' meta; "" for rows without a job.
    assert [run for _, run, _ in rows] == ["run-a", "", ""]


def test_fractional_parts_are_in_range_for_credits() -> None:
    columns, _ = ledger_columns(Inputs(dims=DIMS, job_meta=JOBS), LEDGER)
    for low in (columns[8], columns[10], columns[12], columns[14]):
        assert (low >= 0).all()
    # -5 units: whole part -1, fractional part 10^12 - 5.
    assert (int(columns[7][1]), int(columns[8][1])) == (-1, 10**12 - 5)
