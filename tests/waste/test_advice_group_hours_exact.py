"""advice_groups sums the attempts' microseconds as integers (per group, and per group and GPU
count) and makes them hours once: the same exact sums as adding each attempt's hours and
GPU-hours as Fractions, whatever the durations and GPU counts (MIG slices included)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from finops.run_metrics.selectors import RunKey
from finops.waste.advice import advice_groups
from finops.waste.attempts import Attempt
from finops.waste.causes import AttemptShares, Settings, WasteParts
from finops.waste.selectors import AttemptWaste, RunWaste

MONTH = dt.date(2025, 6, 1)
START = dt.datetime(2025, 6, 3, tzinfo=dt.UTC)
SETTINGS = Settings(checkpoint_interval_minutes=Decimal(30), restart_minutes=Decimal(15))
_HOUR_MICROS = 3_600_000_000

_attempts = st.lists(
    st.tuples(
        st.integers(min_value=-10, max_value=5 * _HOUR_MICROS),  # length in microseconds
        st.sampled_from([Fraction(1, 7), Fraction(1, 2), Fraction(3, 7), Fraction(8), 0]),
        st.sampled_from(["hpc", "cloud"]),
    ),
    max_size=30,
)


def _runs(drawn: list[tuple[int, Fraction | int, str]]) -> list[RunWaste]:
    runs = []
    for i, (micros, gpus, cluster) in enumerate(drawn):
        attempt = Attempt(
            pk=i, cluster=cluster, job_id=str(i), attempt=1, state="COMPLETED", start=START,
            end=START + dt.timedelta(microseconds=micros), utilisation=None,
            gpus=Fraction(gpus), cost_by_month={MONTH: Decimal(1)}, pricing="on_demand",
        )  # fmt: skip
        row = AttemptWaste(attempt, AttemptShares(i, {}), WasteParts())
        key = RunKey(None, "", f"run-{i % 4}", "USD")
        runs.append(RunWaste(key, Decimal(1), WasteParts(), [row], False, SETTINGS))
    return runs


@settings(max_examples=200, deadline=None)
@given(_attempts)
def test_hours_are_the_fraction_sums(drawn: list[tuple[int, Fraction | int, str]]) -> None:
    groups = advice_groups(_runs(drawn), MONTH)
    for cluster in ("hpc", "cloud"):
        mine = [(m, Fraction(g)) for m, g, c in drawn if c == cluster]
        if not mine:
            assert (None, cluster, "USD", "on_demand") not in groups
            continue
        group = groups[(None, cluster, "USD", "on_demand")]
        hours = [Fraction(m, _HOUR_MICROS) for m, _ in mine if m > 0]
        assert group.exact_hours == sum(hours, Fraction(0))
        gpu_hours = [Fraction(m, _HOUR_MICROS) * g for m, g in mine if m > 0]
        assert group.exact_gpu_hours == sum(gpu_hours, Fraction(0))
        exact = sum(gpu_hours, Fraction(0))
        assert group.gpu_hours == Decimal(exact.numerator) / Decimal(exact.denominator)
