"""A run's progress against its cost (the run page's chart, issue 30): at each logged step, the
tokens the run had (cumulative as logged: a restart from a checkpoint shows as a drop) beside
the cost its jobs had accrued by then.

Accrued cost: each job's cost (from the ledger, in the chart's currency) spread evenly over its
run time, so a job half done at a step has accrued half its cost. The ledger splits a node-hour's
cost evenly over its GPU-seconds, so within one job and node the spread is exact; across nodes of
different prices it is the job's mean rate (said beside the chart).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from finops.attribution.selectors.runs import RunJobRow
from finops.run_metrics.progress import Point

CENT = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class ProgressCostPoint:
    timestamp: datetime
    step: int
    tokens: int | None
    cost: Decimal
    checkpoint: bool
    attempt: int | None  # the attempt (1, 2, ... in time order) running at the step


def _accrued(job_row: RunJobRow, at: datetime) -> Decimal:
    job = job_row.job
    if job is None or job.start is None:
        return Decimal(0)
    end = job.end or at
    if at >= end:
        return job_row.cost
    if at <= job.start or end <= job.start:
        return Decimal(0)
    share = Decimal((at - job.start).total_seconds()) / Decimal((end - job.start).total_seconds())
    return job_row.cost * share


def _attempt(rows: Sequence[RunJobRow], at: datetime) -> int | None:
    timed = [r.job for r in rows if r.job is not None and r.job.start is not None]
    timed.sort(key=lambda j: (j.start, j.job_id, j.attempt))
    found = None
    for number, job in enumerate(timed, start=1):
        if job.start is not None and job.start <= at:
            found = number
    return found


def progress_against_cost(
    points: Sequence[Point], jobs: Sequence[RunJobRow], currency: str
) -> list[ProgressCostPoint]:
    rows = [r for r in jobs if r.currency == currency]
    return [
        ProgressCostPoint(
            timestamp=p.timestamp,
            step=p.step,
            tokens=p.tokens,
            cost=sum((_accrued(r, p.timestamp) for r in rows), Decimal(0)).quantize(CENT),
            checkpoint=p.checkpoint,
            attempt=_attempt(rows, p.timestamp),
        )
        for p in points
    ]
