"""The sums behind the ledger's rollups (TeamDailyCost, RunCost), per rollup key, built from
ledger rows and added together: a month attributed in parts sums the rows each part writes
itself, the reduce sums the rest, and the rollups are written from the merged sums
(ledger.write). Every column is an integer (10^-12 units) or a quantised Decimal of
GPU-seconds, so sums in any grouping are exact; a run's jobs are kept as sets, so a job seen by
two parts (a multi-node job whose nodes fall in both, or its spread idle) counts once.

Sums travel between processes as plain values (state / from_state: ints, strings, lists).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from finops.attribution.engine.waste import in_waste_state
from finops.attribution.inputs.list_cost import ESTIMATED_SOURCES, MIX_KINDS
from finops.attribution.inputs.month import Dims, JobMeta

_ZERO = Decimal(0)

# Ledger key: (dims index, day, category, team id, job id, node).
LedgerKey = tuple[int, int, str, int | None, int | None, str]
# Ledger value: [units of 10^-12, GPU-seconds, list units, contracted units]; after finish the
# GPU-seconds are quantised.
Ledger = dict[LedgerKey, list[Any]]
# (provider, account, currency, column) -> units; columns: cost, on-demand equivalent, contracted.
Bill = dict[tuple[str, str, str, int], int]
# TeamDailyCost: (day, team id, category, provider, currency).
DailyKey = tuple[int, int | None, str, str, str]
# RunCost: (team id, run id, cluster, currency).
RunKey = tuple[int | None, str, str, str]

# Rollup columns accumulated from ledger rows, in 10^-12 units (GPU-seconds as Decimal):
# [cost, GPU-seconds, on-demand equivalent, contracted, estimated on-demand, mix by MIX_KINDS...]
MIX_AT = {kind: 5 + i for i, kind in enumerate(MIX_KINDS)}


def new_rollup() -> list[Any]:
    return [0, _ZERO, 0, 0, 0, *([0] * len(MIX_KINDS))]


def rollup_add(acc: list[Any], dims: Dims, values: list[Any]) -> None:
    units, seconds, list_units, contracted_units = values
    acc[0] += units
    if seconds:
        acc[1] += seconds
    acc[2] += list_units
    acc[3] += contracted_units
    if dims[8] in ESTIMATED_SOURCES:
        acc[4] += list_units
    acc[MIX_AT[dims[7]]] += units


def rollup_merge(acc: list[Any], other: list[Any]) -> None:
    # In place, one comprehension: a split month merges each of its 300,000 runs' sums from
    # every part (a loop of indexed += cost the reduce 9 s).
    acc[:] = [mine + theirs for mine, theirs in zip(acc, other, strict=True)]


def _rollup_out(acc: list[Any]) -> list[Any]:
    return [acc[0], str(acc[1]), *acc[2:]]


def _rollup_in(state: list[Any]) -> list[Any]:
    return [state[0], Decimal(state[1]), *state[2:]]


def daily_sums(dims: list[Dims], ledger: Ledger) -> dict[DailyKey, list[Any]]:
    sums: dict[DailyKey, list[Any]] = {}
    for (dims_i, day, category, team_id, _, _), values in ledger.items():
        row_dims = dims[dims_i]
        key = (day, team_id, category, row_dims[0], row_dims[5])
        acc = sums.get(key)
        if acc is None:
            acc = sums[key] = new_rollup()
        rollup_add(acc, row_dims, values)
    return sums


def daily_merge(into: dict[DailyKey, list[Any]], sums: dict[DailyKey, list[Any]]) -> None:
    for key, acc in sums.items():
        mine = into.get(key)
        if mine is None:
            into[key] = list(acc)
        else:
            rollup_merge(mine, acc)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def _epoch_us(value: dt.datetime | None) -> int | None:
    """Exact microseconds since the epoch (a float timestamp would round at this size)."""
    return None if value is None else (value - _EPOCH) // _MICROSECOND


def _from_epoch_us(value: int | None) -> dt.datetime | None:
    return None if value is None else _EPOCH + value * _MICROSECOND


@dataclass(slots=True)
class RunAcc:
    """A run's sums, and what RunCost says of its jobs (those with rows in the month)."""

    columns: list[Any] = field(default_factory=new_rollup)
    wasted: int = 0
    jobs: set[int] = field(default_factory=set)
    failed: set[int] = field(default_factory=set)
    running: set[int] = field(default_factory=set)
    first_start: dt.datetime | None = None
    last_end: dt.datetime | None = None
    endpoint: bool = False

    def job_add(self, job_id: int, meta: JobMeta) -> None:
        if job_id in self.jobs:
            return
        self.jobs.add(job_id)
        if in_waste_state(meta.state, meta.service):
            self.failed.add(job_id)
        if meta.end is None or meta.state == "RUNNING":
            self.running.add(job_id)
        self._times(meta.start, meta.end, bool(meta.endpoint))

    def _times(self, start: dt.datetime | None, end: dt.datetime | None, endpoint: bool) -> None:
        if start is not None and (self.first_start is None or start < self.first_start):
            self.first_start = start
        if end is not None and (self.last_end is None or end > self.last_end):
            self.last_end = end
        self.endpoint = self.endpoint or endpoint

    def merge(self, other: RunAcc) -> None:
        rollup_merge(self.columns, other.columns)
        self.wasted += other.wasted
        self.jobs |= other.jobs
        self.failed |= other.failed
        self.running |= other.running
        self._times(other.first_start, other.last_end, other.endpoint)

    def state(self) -> tuple[Any, ...]:
        return (
            _rollup_out(self.columns), self.wasted, list(self.jobs), list(self.failed),
            list(self.running), _epoch_us(self.first_start), _epoch_us(self.last_end),
            self.endpoint,
        )  # fmt: skip

    @classmethod
    def from_state(cls, state: tuple[Any, ...]) -> RunAcc:
        columns, wasted, jobs, failed, running, first, last, endpoint = state
        return cls(
            _rollup_in(columns), wasted, set(jobs), set(failed), set(running),
            _from_epoch_us(first), _from_epoch_us(last), endpoint,
        )  # fmt: skip


def run_sums(
    dims: list[Dims], job_meta: dict[int, JobMeta], ledger: Ledger, wasted_jobs: set[int]
) -> dict[RunKey, RunAcc]:
    """RunAcc per run from the job rows of the ledger (ledger._run_rows says what a run is)."""
    runs: dict[RunKey, RunAcc] = {}
    for (dims_i, team_id, job_id), values in _per_job(ledger).items():
        meta = job_meta[job_id]
        row_dims = dims[dims_i]
        key = (team_id, meta.run_id, meta.cluster, row_dims[5])
        acc = runs.get(key)
        if acc is None:
            acc = runs[key] = RunAcc()
        rollup_add(acc.columns, row_dims, values)
        if job_id in wasted_jobs:
            acc.wasted += values[0]
        acc.job_add(job_id, meta)
    return runs


def _per_job(ledger: Ledger) -> dict[tuple[int, int | None, int], list[Any]]:
    """The job rows summed per (dims index, team id, job id), over their days and nodes: what
    run_sums adds to a run is the same (exact sums), for a few times fewer RunAcc updates (a
    job has a row per node and day)."""
    per_job: dict[tuple[int, int | None, int], list[Any]] = {}
    for (dims_i, _, _, team_id, job_id, _), values in ledger.items():
        if job_id is None:
            continue
        key = (dims_i, team_id, job_id)
        acc = per_job.get(key)
        if acc is None:
            per_job[key] = list(values)
            continue
        acc[0] += values[0]
        if values[1]:
            acc[1] += values[1]
        acc[2] += values[2]
        acc[3] += values[3]
    return per_job


def runs_merge(into: dict[RunKey, RunAcc], runs: dict[RunKey, RunAcc]) -> None:
    for key, acc in runs.items():
        mine = into.get(key)
        if mine is None:
            into[key] = acc
        else:
            mine.merge(acc)


def daily_state(sums: dict[DailyKey, list[Any]]) -> list[tuple[DailyKey, list[Any]]]:
    return [(key, _rollup_out(acc)) for key, acc in sums.items()]


def daily_from_state(state: Iterable[tuple[DailyKey, list[Any]]]) -> dict[DailyKey, list[Any]]:
    return {tuple(key): _rollup_in(acc) for key, acc in state}  # type: ignore[misc]


def runs_state(runs: dict[RunKey, RunAcc]) -> list[tuple[RunKey, tuple[Any, ...]]]:
    return [(key, acc.state()) for key, acc in runs.items()]


def runs_from_state(state: Iterable[tuple[RunKey, tuple[Any, ...]]]) -> dict[RunKey, RunAcc]:
    return {tuple(key): RunAcc.from_state(acc) for key, acc in state}  # type: ignore[misc]
