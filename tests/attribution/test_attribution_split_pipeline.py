"""The pipeline carries on after a month split across workers without a worker waiting for it:
the attribute step queues the chord and is left WAITING; the reduce, once its ledger has
committed, resumes the run (finops.pipeline.resume), which claims the step exactly once and
queues the steps after it. A failed part fails the run and the month keeps its ledger."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from finops.attribution.models import AttributionRun
from finops.attribution.services import attribution_month_run
from finops.pipeline.models import PipelineRun, PipelineStep
from finops.pipeline.services import (
    pipeline_run_create,
    pipeline_start,
    pipeline_step_begin,
    pipeline_step_resume,
    pipeline_step_wait,
)
from finops.pipeline.steps import STEPS
from finops.pipeline.tasks import pipeline_resume
from tests.split_months import MONTH, scenario_build, snapshot

Status = PipelineStep.Status


def _waiting_run() -> PipelineRun:
    """A run whose first step (attribute) began and handed its work off."""
    run = pipeline_run_create(month=MONTH, reason="test")
    step = pipeline_step_begin(run_id=run.pk, index=0)
    assert step is not None
    assert pipeline_step_wait(step_id=step.pk, run_id=run.pk)
    return run


def _statuses(run: PipelineRun) -> list[str]:
    return list(run.steps.order_by("index").values_list("status", flat=True))


@pytest.mark.django_db
def test_a_waiting_step_is_claimed_once() -> None:
    run = _waiting_run()
    assert _statuses(run) == [Status.WAITING] + [Status.PENDING] * (len(STEPS) - 1)
    first = pipeline_step_resume(run_id=run.pk)
    assert (first.outcome, first.next_index) == ("continue", 1)
    # A redelivered reduce sends the resume again: nothing is left to claim.
    again = pipeline_step_resume(run_id=run.pk)
    assert (again.outcome, again.next_index) == ("nothing", None)
    run.refresh_from_db()
    assert run.status == PipelineRun.Status.RUNNING
    assert _statuses(run) == [Status.SUCCEEDED] + [Status.PENDING] * (len(STEPS) - 1)


@pytest.mark.django_db
def test_a_waiting_step_is_not_run_again_and_no_later_step_starts_before_it_ends() -> None:
    run = _waiting_run()
    assert pipeline_step_begin(run_id=run.pk, index=0) is None  # redelivered: its chord runs
    assert pipeline_step_begin(run_id=run.pk, index=1) is None  # an old chain's next link
    assert _statuses(run)[:2] == [Status.WAITING, Status.PENDING]
    pipeline_step_resume(run_id=run.pk)
    assert pipeline_step_begin(run_id=run.pk, index=1) is not None


@pytest.mark.django_db
def test_a_resume_before_the_step_is_marked_waiting_asks_again() -> None:
    run = pipeline_run_create(month=MONTH, reason="test")
    step = pipeline_step_begin(run_id=run.pk, index=0)
    assert step is not None
    assert pipeline_step_resume(run_id=run.pk).outcome == "not yet"
    assert _statuses(run)[0] == Status.RUNNING
    assert pipeline_step_wait(step_id=step.pk, run_id=run.pk)
    assert pipeline_step_resume(run_id=run.pk).outcome == "continue"


@pytest.mark.django_db
def test_a_failed_reduce_fails_the_run_once_and_a_late_success_changes_nothing() -> None:
    run = _waiting_run()
    failed = pipeline_step_resume(run_id=run.pk, error="PartsFailedError: part from i-n3: boom")
    assert failed.outcome == "failed"
    run.refresh_from_db()
    assert run.status == PipelineRun.Status.FAILED
    assert "boom" in run.error
    assert _statuses(run) == [Status.FAILED] + [Status.SKIPPED] * (len(STEPS) - 1)
    assert pipeline_step_resume(run_id=run.pk).outcome == "nothing"
    run.refresh_from_db()
    assert run.status == PipelineRun.Status.FAILED


@pytest.mark.django_db
def test_a_failure_before_the_step_is_marked_waiting_fails_the_run_at_once() -> None:
    run = pipeline_run_create(month=MONTH, reason="test")
    step = pipeline_step_begin(run_id=run.pk, index=0)
    assert step is not None
    assert pipeline_step_resume(run_id=run.pk, error="boom").outcome == "failed"
    assert not pipeline_step_wait(step_id=step.pk, run_id=run.pk)  # stays FAILED
    assert _statuses(run)[0] == Status.FAILED


@pytest.mark.django_db
def test_the_resume_task_runs_the_following_steps_exactly_once() -> None:
    run = _waiting_run()
    result = pipeline_resume.apply(args=(run.pk,)).get()  # eager: the next steps run here
    assert result["outcome"] == "continue"
    run.refresh_from_db()
    assert run.status == PipelineRun.Status.SUCCEEDED
    assert _statuses(run) == [Status.SUCCEEDED] * len(STEPS)
    attempts = list(run.steps.order_by("index").values_list("attempts", flat=True))
    assert attempts == [1] * len(STEPS)
    assert pipeline_resume.apply(args=(run.pk,)).get()["outcome"] == "nothing"
    assert list(run.steps.order_by("index").values_list("attempts", flat=True)) == attempts


@pytest.fixture
def worker_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The workers split every month in two parts; a test may add a fault (indirect param)."""
    extra: dict[str, str] = getattr(request, "param", {})
    return {"FINOPS_ATTRIBUTION_PARTS": "2", **extra}


def _finished(run: PipelineRun, timeout: float = 180) -> PipelineRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in (PipelineRun.Status.SUCCEEDED, PipelineRun.Status.FAILED):
            return run
        time.sleep(0.5)
    raise AssertionError(f"pipeline run still {run.status}: {_statuses(run)}")


@pytest.mark.worker
def test_a_split_month_runs_every_step_on_one_attribution_worker_process(
    celery_worker_process: Path,
) -> None:
    """One worker process (solo pool) on the attribution queue: a step that waited for its
    chord there would hold the only process its parts can run in, and never end."""
    scenario_build()
    attribution_month_run(month=MONTH)
    whole = snapshot()
    [run] = pipeline_start(months=[MONTH], reason="split test")
    run = _finished(run)
    assert run.status == PipelineRun.Status.SUCCEEDED, run.error
    assert _statuses(run) == [Status.SUCCEEDED] * len(STEPS)
    assert run.steps.get(index=0).attempts == 1
    assert snapshot() == whole
    newest = AttributionRun.objects.order_by("-id").first()
    assert newest is not None
    assert newest.status == AttributionRun.Status.SUCCEEDED
    log = celery_worker_process.read_text()
    assert log.count("attribution_month_part[") >= 2
    assert "attribution_month_reduce[" in log
    assert "finops.pipeline.resume[" in log


@pytest.mark.worker
@pytest.mark.parametrize(
    "worker_env", [{"FINOPS_FAULT_INJECT": "attribution_part:raise"}], indirect=True
)
def test_a_failed_part_fails_the_run_and_the_month_keeps_its_ledger(
    celery_worker_process: Path,
) -> None:
    scenario_build()
    attribution_month_run(month=MONTH)
    whole = snapshot()
    [run] = pipeline_start(months=[MONTH], reason="split test")
    run = _finished(run)
    assert run.status == PipelineRun.Status.FAILED
    assert "fault injected at attribution_part" in run.error
    assert _statuses(run) == [Status.FAILED] + [Status.SKIPPED] * (len(STEPS) - 1)
    assert snapshot() == whole
    newest = AttributionRun.objects.order_by("-id").first()
    assert newest is not None
    assert newest.status == AttributionRun.Status.FAILED
    assert "PartsFailedError" in newest.error
