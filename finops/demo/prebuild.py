"""Each month's files built in a second process while the first ingests the month before:
generating a month (fleet, jobs, bills, counters, run metrics; pure, no database) takes a few
seconds of CPU that the other core does meanwhile. Only what the ingest needs comes back, and
what the month left running, which the next month's exports list again (carry.py): so each
month is submitted once the month before is built, while that one ingests."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from random import Random

from finops.demo.carry import StillOpen
from finops.demo.dataset import DemoFile, coreweave_rates, dataset_build, dataset_write
from finops.demo.export_coreweave import ContractRate
from finops.demo.fleet import Month
from finops.demo.focus_catalogue import Row
from finops.demo.history import MonthPlan
from finops.demo.run_metrics import MetricsFile, run_logs, run_metrics_write


@dataclass(frozen=True)
class BuiltMonth:
    month: Month
    files: list[DemoFile]
    metrics: list[MetricsFile]
    invoiced: Decimal
    effective: Decimal
    rates: list[ContractRate]
    # The AWS bill's FOCUS rows, for the month that is restated later (else empty).
    aws_rows: list[Row]
    # The jobs and pods its exports list as still running (the next month lists them again).
    still_open: StillOpen


def build_month(
    *,
    seed: int,
    month: Month,
    scale: str,
    plan: MonthPlan | None,
    out: Path,
    keep_aws: bool,
    carried: StillOpen | None = None,
) -> BuiltMonth:
    dataset = dataset_build(seed=seed, month=month, scale=scale, plan=plan, carried=carried)
    files = dataset_write(dataset=dataset, out=out)
    logs = run_logs(
        rng=Random(f"{seed}:metrics:{month.label}"),
        jobs=[job for jobs in dataset.jobs.values() for job in jobs],
        month=month,
    )
    return BuiltMonth(
        month=month,
        files=files,
        metrics=run_metrics_write(logs=logs, month=month, out=out),
        invoiced=dataset.invoiced_total(),
        effective=dataset.effective_total(),
        rates=coreweave_rates(dataset),
        aws_rows=dataset.bills["aws"] if keep_aws else [],
        still_open=dataset.still_open(),
    )


def months_built(
    *,
    seed: int,
    months: list[Month],
    scale: str,
    plans: list[MonthPlan] | None,
    out: Path,
    keep_aws: int | None,
) -> Iterator[BuiltMonth]:
    """The months in order, each built in a worker process ahead of its ingest (fork: the
    worker touches no database)."""
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:

        def submit(index: int, carried: StillOpen | None) -> Future[BuiltMonth]:
            return pool.submit(
                build_month,
                seed=seed,
                month=months[index],
                scale=scale,
                plan=plans[index] if plans else None,
                out=out,
                keep_aws=index == keep_aws,
                # A single month (no history) stands alone.
                carried=carried if plans else None,
            )

        future = submit(0, None) if months else None
        for index in range(len(months)):
            assert future is not None
            built = future.result()
            if index + 1 < len(months):
                future = submit(index + 1, built.still_open)
            yield built
