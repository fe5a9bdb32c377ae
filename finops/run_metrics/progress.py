"""A run's progress as its metrics show it: the points in time order and what survived.

Shared by efficiency (this issue), waste (attempts, checkpoints, rework after the last
checkpoint) and energy: one place that finds a run's metrics and orders its points.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from finops.core.sql_arrays import AnyOf
from finops.run_metrics.models import RunMetricPoint, TrainingRun
from finops.run_metrics.parsers.common import DEFAULT_DTYPE

FLOPS_PER_PARAM_TOKEN = 6  # forward + backward of a dense transformer (DESIGN section 9)


@dataclass(frozen=True, slots=True)
class Point:
    timestamp: datetime
    step: int
    tokens: int | None
    samples: int | None
    checkpoint: bool


@dataclass(frozen=True, slots=True)
class RunProgress:
    """The metrics of one run: its constants and its points in time order (every attempt)."""

    run: TrainingRun
    points: list[Point]

    @property
    def useful_tokens(self) -> int | None:
        """The final cumulative token count: the work that survived every restart."""
        return next((p.tokens for p in reversed(self.points) if p.tokens is not None), None)

    @property
    def useful_samples(self) -> int | None:
        return next((p.samples for p in reversed(self.points) if p.samples is not None), None)

    @property
    def final_step(self) -> int | None:
        return self.points[-1].step if self.points else None

    @property
    def dtype(self) -> str:
        return self.run.dtype or DEFAULT_DTYPE

    @property
    def flops_per_token(self) -> int | None:
        """As given, else 6 x model parameters; None when neither is known."""
        if self.run.flops_per_token:
            return self.run.flops_per_token
        if self.run.model_params:
            return FLOPS_PER_PARAM_TOKEN * self.run.model_params
        return None

    @property
    def checkpoints(self) -> list[Point]:
        return [p for p in self.points if p.checkpoint]


def training_runs_matching(keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], TrainingRun]:
    """The metrics run of each (team slug, run id): the team's own, else the run id's without a
    team (metrics that name no team). One query."""
    wanted = set(keys)
    if not wanted:
        return {}
    candidates = TrainingRun.objects.filter(AnyOf("run_id", {run_id for _, run_id in wanted}))
    by_key = {(r.team_slug, r.run_id): r for r in candidates}
    found: dict[tuple[str, str], TrainingRun] = {}
    for team, run_id in wanted:
        run = by_key.get((team, run_id)) or by_key.get(("", run_id))
        if run is not None:
            found[(team, run_id)] = run
    return found


def run_progress(run: TrainingRun) -> RunProgress:
    rows = RunMetricPoint.objects.filter(run=run).order_by("timestamp", "source_file", "line")
    points = [
        Point(p.timestamp, p.step, p.tokens, p.samples, p.checkpoint)
        for p in rows.only("timestamp", "step", "tokens", "samples", "checkpoint")
    ]
    return RunProgress(run=run, points=points)


def run_progresses(runs: Iterable[TrainingRun]) -> dict[int, RunProgress]:
    """run_progress of many runs (by TrainingRun pk): one query per 900 runs, the points in
    the same order as run_progress's."""
    by_pk = {run.pk: run for run in runs}
    points: dict[int, list[Point]] = {pk: [] for pk in by_pk}
    pks = sorted(by_pk)
    for start in range(0, len(pks), 900):
        rows = (
            RunMetricPoint.objects.filter(run_id__in=pks[start : start + 900])
            .order_by("run_id", "timestamp", "source_file", "line")
            .values_list("run_id", "timestamp", "step", "tokens", "samples", "checkpoint")
        )
        for run_pk, timestamp, step, tokens, samples, checkpoint in rows:
            points[run_pk].append(Point(timestamp, step, tokens, samples, checkpoint))
    return {pk: RunProgress(run=by_pk[pk], points=found) for pk, found in points.items()}


def run_progress_points(*, team_slug: str, run_id: str) -> list[Point]:
    """The points of the team's run (else of the run id with no team), in time order."""
    run = training_runs_matching([(team_slug, run_id)]).get((team_slug, run_id))
    return run_progress(run).points if run is not None else []
