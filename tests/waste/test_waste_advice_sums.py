"""Checkpoint advice sums its attempts' hours exactly (finops.waste.advice.advice_groups), so
its figures do not depend on the order the month's runs are read in (a set of runs) or on
whether they come from the stored run economics or a new read.

Hand-worked: six attempts of 20 minutes and one of 54 seconds are 2 + 0.015 = 2.015 hours; with
4 interruptions the mean time between them is 0.50375 hours, 0.5038 to 4 places (half to even).
Summed as rounded quotients (1/3 hour is 0.3333...3 to 28 digits) the hours were
2.014999999999999999999999999 and that mean 0.5037."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

from finops.run_metrics.selectors import RunKey
from finops.waste.advice import advice_groups, advice_rows
from finops.waste.attempts import Attempt
from finops.waste.causes import AttemptShares, Settings, WasteParts
from finops.waste.selectors import AttemptWaste, RunWaste

MONTH = dt.date(2025, 6, 1)
START = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)
SETTINGS = Settings(checkpoint_interval_minutes=Decimal(30), restart_minutes=Decimal(15))


def _run(run_id: str, durations: list[dt.timedelta], states: list[str]) -> RunWaste:
    rows = []
    at = START
    for i, (length, state) in enumerate(zip(durations, states, strict=True)):
        attempt = Attempt(
            pk=len(run_id) * 100 + i, cluster="hpc", job_id=f"{run_id}-{i}", attempt=1,
            state=state, start=at, end=at + length, utilisation=None, gpus=Fraction(8),
            cost_by_month={MONTH: Decimal(10)}, pricing="on_demand",
        )  # fmt: skip
        rows.append(AttemptWaste(attempt, AttemptShares(attempt.pk, {}), WasteParts()))
        at += length
    key = RunKey(None, "", run_id, "USD")
    return RunWaste(key, Decimal(10) * len(rows), WasteParts(), rows, False, SETTINGS)


def test_hours_are_summed_exactly_in_any_order() -> None:
    twenty = dt.timedelta(minutes=20)
    runs = [
        _run("a", [twenty] * 3, ["FAILED", "FAILED", "COMPLETED"]),
        _run(
            "bb",
            [twenty] * 3 + [dt.timedelta(seconds=54)],
            ["FAILED", "FAILED"] + ["COMPLETED"] * 2,
        ),
    ]
    for order in (runs, runs[::-1]):
        [group] = advice_groups(order, MONTH).values()
        assert group.hours == Decimal("2.015")
        assert group.gpu_hours == Decimal("16.12")  # 8 GPUs
        assert group.interruptions == 4
        [row] = advice_rows({(None, "hpc", "USD", "on_demand"): group}, SETTINGS)
        assert row.attempt_hours == Decimal("2.0150")
        assert row.mean_hours_between_interruptions == Decimal("0.5038")
