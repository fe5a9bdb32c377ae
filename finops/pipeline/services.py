"""Writes of the pipeline: runs and their steps, claims of month changes, dead workers.

A run moves PENDING -> RUNNING (its first step began) -> SUCCEEDED (its last step ended) or
FAILED (a step failed, its worker died, or it could not be queued). A step RUNNING may become
WAITING (its task queued its work as other tasks and returned, freeing its worker); the last of
those tasks resumes the run (pipeline_step_resume), which queues the following steps. Its steps
are copied from finops.pipeline.steps.STEPS when it is created. Every transition is a
conditional UPDATE or a locked row, so a step the broker delivers twice (acks_late after a
worker died) runs again harmlessly and never moves a finished run back.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string
from kombu.exceptions import OperationalError as BrokerError

from billing_ingest.models import CostLineItem, MonthChange
from billing_ingest.services.batches import import_batches_fail_dead
from finops.attribution.services import attribution_runs_fail_dead
from finops.core.heartbeat import dead_worker_message, heartbeat_deadline
from finops.core.months import month_format, month_previous
from finops.core.queue import task_signature, tasks_chain_send
from finops.org.services import data_version_bump
from finops.pipeline.models import PipelineRun, PipelineStep
from finops.pipeline.steps import STEPS

logger = logging.getLogger(__name__)

# A run whose worker died is started again this many times in all, by the watchdog.
MAX_ATTEMPTS = 3
_DONE = (PipelineRun.Status.SUCCEEDED, PipelineRun.Status.FAILED)
_STEP_DONE = (PipelineStep.Status.SUCCEEDED, PipelineStep.Status.SKIPPED)

# finops.pipeline.tasks.run_step: one step of a run, queued by name (a service never imports a
# tasks module: finops.core.queue).
RUN_STEP_TASK = "finops.pipeline.run_step"


class PipelineQueueError(RuntimeError):
    """The pipeline could not be queued (broker unreachable); the run is recorded FAILED."""


class StartedRun(TypedDict):
    """A run pipeline_pending_start started (eager: already finished)."""

    run: int
    status: str
    error: str


class WatchdogResult(TypedDict):
    """What pipeline_watchdog_sweep found and did: ids of the work failed, retried or started."""

    batches_failed: list[int]
    attribution_runs_failed: list[int]
    pipeline_runs_retried: list[int]
    pipeline_runs_started: list[int]


def pipeline_run_create(
    *, month: dt.date, reason: str, retry_of: PipelineRun | None = None
) -> PipelineRun:
    """Record a PENDING run of every step for the month (first day). The caller queues it."""
    with transaction.atomic():
        run = PipelineRun.objects.create(
            month=month.replace(day=1),
            reason=reason[:300],
            attempt=retry_of.attempt + 1 if retry_of is not None else 1,
            retry_of=retry_of,
            heartbeat_at=timezone.now(),
        )
        PipelineStep.objects.bulk_create(
            PipelineStep(run=run, index=i, key=step.key, task=step.task)
            for i, step in enumerate(STEPS)
        )
    return run


def pipeline_run_fail(*, run_id: int, error: str) -> None:
    """End an unfinished run as FAILED: its running or pending steps too (the first one left
    gets the error, the rest are skipped)."""
    now = timezone.now()
    with transaction.atomic():
        run = PipelineRun.objects.select_for_update().get(pk=run_id)
        if run.status in _DONE:
            return
        open_steps = run.steps.exclude(status__in=[*_STEP_DONE, PipelineStep.Status.FAILED])
        first = open_steps.order_by("index").first()
        if first is not None:
            PipelineStep.objects.filter(pk=first.pk).update(
                status=PipelineStep.Status.FAILED, error=error, finished_at=now
            )
        later = open_steps if first is None else open_steps.exclude(pk=first.pk)
        later.update(status=PipelineStep.Status.SKIPPED, finished_at=now)
        step = f"step {first.key}: " if first is not None else ""
        PipelineRun.objects.filter(pk=run_id).update(
            status=PipelineRun.Status.FAILED, error=f"{step}{error}", finished_at=now
        )


def pipeline_changes_unclaim(*, run_id: int) -> None:
    """The run could not be queued: give its month changes back for the next claim."""
    MonthChange.objects.filter(pipeline_run_id=run_id).update(claimed_at=None, pipeline_run_id=None)


def pipeline_changes_claim() -> list[PipelineRun]:
    """Take every month change waiting for the pipeline; returns the runs to queue.

    A month that already has a run waiting to start (PENDING) gets the change added to that
    run: its attribution has not read anything yet, so it will include the change. The first
    step locks the run row to start it, as this does to join it, so the two never cross."""
    new_runs: list[PipelineRun] = []
    with transaction.atomic():
        waiting = MonthChange.objects.select_for_update(skip_locked=True).filter(
            start_pipeline=True, claimed_at__isnull=True
        )
        by_month: dict[dt.date, list[MonthChange]] = defaultdict(list)
        for change in waiting.order_by("id"):
            by_month[change.month].append(change)
        now = timezone.now()
        for month, changes in sorted(by_month.items()):
            run = (
                PipelineRun.objects.select_for_update()
                .filter(month=month, status=PipelineRun.Status.PENDING)
                .order_by("-id")
                .first()
            )
            if run is None:
                run = pipeline_run_create(month=month, reason=_reason(changes))
                new_runs.append(run)
            MonthChange.objects.filter(id__in=[c.pk for c in changes]).update(
                claimed_at=now, pipeline_run_id=run.pk
            )
    return new_runs


def _reason(changes: Iterable[MonthChange]) -> str:
    batches = sorted({c.batch_id for c in changes if c.batch_id is not None})
    kinds = sorted({c.kind for c in changes if c.batch_id is None})
    parts = [f"import batch {', '.join(map(str, batches))}"] if batches else []
    parts += [f"{kind} import" for kind in kinds]
    return "; ".join(parts) or "month changed"


def pipeline_step_begin(*, run_id: int, index: int) -> PipelineStep | None:
    """Mark a step RUNNING (and its run, if this is the first); None when it must not run: the
    run already ended (failed, found dead, or done), the step already finished or is WAITING,
    or an earlier step has not finished. A step found RUNNING is a redelivery after its worker
    died: it runs again (steps are idempotent)."""
    now = timezone.now()
    with transaction.atomic():
        run = PipelineRun.objects.select_for_update().get(pk=run_id)
        if run.status in _DONE:
            return None
        step = run.steps.get(index=index)
        if step.status in (*_STEP_DONE, PipelineStep.Status.FAILED, PipelineStep.Status.WAITING):
            return None  # a WAITING step's work is under way in other tasks
        if run.steps.filter(index__lt=index).exclude(status__in=_STEP_DONE).exists():
            return None  # an earlier step has not ended: pipeline_step_resume queues this one
        step.status = PipelineStep.Status.RUNNING
        step.attempts += 1
        step.started_at = step.started_at or now
        step.heartbeat_at = now
        step.error = ""
        step.save(update_fields=["status", "attempts", "started_at", "heartbeat_at", "error"])
        if run.status == PipelineRun.Status.PENDING:
            run.status = PipelineRun.Status.RUNNING
            run.started_at = now
        run.heartbeat_at = now
        run.save(update_fields=["status", "started_at", "heartbeat_at"])
    return step


def pipeline_step_touch(*, step_id: int, run_id: int) -> None:
    now = timezone.now()
    PipelineStep.objects.filter(pk=step_id, status=PipelineStep.Status.RUNNING).update(
        heartbeat_at=now
    )
    PipelineRun.objects.filter(pk=run_id, status=PipelineRun.Status.RUNNING).update(
        heartbeat_at=now
    )


def pipeline_step_retrying(*, step_id: int, error: str) -> None:
    """A transient failure: the step stays RUNNING (it is queued again), with the reason."""
    PipelineStep.objects.filter(pk=step_id, status=PipelineStep.Status.RUNNING).update(
        error=f"retrying after: {error}", heartbeat_at=timezone.now()
    )


def pipeline_step_succeed(*, step_id: int) -> None:
    now = timezone.now()
    with transaction.atomic():
        step = PipelineStep.objects.select_related("run").get(pk=step_id)
        run = PipelineRun.objects.select_for_update().get(pk=step.run_id)
        if run.status in _DONE:
            return  # found dead meanwhile: its result stands, the step's work is idempotent
        PipelineStep.objects.filter(pk=step_id).update(
            status=PipelineStep.Status.SUCCEEDED, error="", finished_at=now, heartbeat_at=now
        )
        _run_step_ended(run, step.index, now)


def _run_step_ended(run: PipelineRun, index: int, now: dt.datetime) -> bool:
    """Step `index` of the (locked) run succeeded: the run too if it was the last (True)."""
    last = not run.steps.filter(index__gt=index).exists()
    run.heartbeat_at = now
    if last:
        run.status = PipelineRun.Status.SUCCEEDED
        run.finished_at = now
    run.save(update_fields=["status", "finished_at", "heartbeat_at"])
    # The step's work (ledger, budgets evaluated, endpoint costs, anomalies...) has committed.
    data_version_bump()
    return last


def pipeline_step_wait(*, step_id: int, run_id: int) -> bool:
    """The step's task handed its work to other tasks (a split attribution's chord): RUNNING
    -> WAITING, so its worker is free. False when the step is no longer RUNNING: they already
    ended and failed the run (pipeline_step_resume)."""
    now = timezone.now()
    waiting = PipelineStep.objects.filter(pk=step_id, status=PipelineStep.Status.RUNNING).update(
        status=PipelineStep.Status.WAITING, heartbeat_at=now
    )
    PipelineRun.objects.filter(pk=run_id, status=PipelineRun.Status.RUNNING).update(
        heartbeat_at=now
    )
    return waiting == 1


@dataclass(frozen=True)
class Resumed:
    """What pipeline_step_resume did. outcome: "continue" (queue the steps from next_index),
    "succeeded" (that was the last step), "failed" (the run is FAILED with the error),
    "not yet" (the step has not been marked WAITING yet: ask again shortly), "nothing" (no
    step waits: the run ended, or a redelivered message already resumed it)."""

    outcome: str
    next_index: int | None = None


def pipeline_step_resume(*, run_id: int, error: str = "") -> Resumed:
    """The work a WAITING step handed off has committed (or failed: error): claim the step,
    exactly once, and say what follows. The claim is a conditional UPDATE (WAITING ->
    SUCCEEDED) under the run's row lock whose row count decides: a second message (a
    redelivered or duplicated reduce) finds nothing to claim and queues nothing."""
    now = timezone.now()
    with transaction.atomic():
        run = PipelineRun.objects.select_for_update().get(pk=run_id)
        if run.status in _DONE:
            return Resumed("nothing")
        open_statuses = [PipelineStep.Status.WAITING, PipelineStep.Status.RUNNING]
        step = run.steps.filter(status__in=open_statuses).order_by("index").first()
        if step is None:
            return Resumed("nothing")
        if error:
            pipeline_run_fail(run_id=run_id, error=error)
            return Resumed("failed")
        if step.status == PipelineStep.Status.RUNNING:
            # Its task queued the work and returns next: it marks the step WAITING then.
            return Resumed("not yet")
        claimed = PipelineStep.objects.filter(
            pk=step.pk, status=PipelineStep.Status.WAITING
        ).update(status=PipelineStep.Status.SUCCEEDED, error="", finished_at=now, heartbeat_at=now)
        if claimed != 1:
            return Resumed("nothing")
        if _run_step_ended(run, step.index, now):
            return Resumed("succeeded")
    return Resumed("continue", step.index + 1)


def pipeline_step_fail(*, step_id: int, error: str) -> None:
    step = PipelineStep.objects.get(pk=step_id)
    pipeline_run_fail(run_id=step.run_id, error=error)


def pipeline_runs_fail_dead(*, run_id: int | None = None) -> list[PipelineRun]:
    """Fail the unfinished runs (one, or all) whose worker died; returns them.

    Dead: a step RUNNING whose heartbeat is older than FINOPS_WORKER_HEARTBEAT_TIMEOUT (its
    worker was killed mid-step). A run with no step running (PENDING, or between two steps)
    is only waiting in the queue, maybe behind a long backlog, and so is a run whose step is
    WAITING for the tasks it queued (a split attribution's parts): it is dead only when nothing
    was heard for FINOPS_PIPELINE_QUEUED_TIMEOUT (its message was lost)."""
    queued_deadline = timezone.now() - dt.timedelta(seconds=settings.FINOPS_PIPELINE_QUEUED_TIMEOUT)
    running_dead = Q(
        steps__status=PipelineStep.Status.RUNNING, steps__heartbeat_at__lt=heartbeat_deadline()
    )
    queued_dead = Q(heartbeat_at__lt=queued_deadline) & ~Q(
        steps__status=PipelineStep.Status.RUNNING, steps__heartbeat_at__gte=heartbeat_deadline()
    )
    runs = PipelineRun.objects.filter(
        status__in=[PipelineRun.Status.PENDING, PipelineRun.Status.RUNNING]
    ).filter(running_dead | queued_dead)
    if run_id is not None:
        runs = runs.filter(pk=run_id)
    dead: list[PipelineRun] = []
    for run in runs.distinct():
        running = run.steps.filter(status=PipelineStep.Status.RUNNING).first()
        last = running.heartbeat_at if running is not None else run.heartbeat_at
        waiting = run.steps.filter(status=PipelineStep.Status.WAITING).first()
        if waiting is not None:
            message = (
                f"step {waiting.key} handed its work to other tasks and nothing came back "
                f"since {last:%Y-%m-%d %H:%M:%S} UTC"
            )
        elif running is None:
            message = f"no worker took it: nothing heard since {last:%Y-%m-%d %H:%M:%S} UTC"
        else:
            message = dead_worker_message(last)
        pipeline_run_fail(run_id=run.pk, error=message)
        logger.warning("pipeline run %s (%s) failed: %s", run.pk, run.month, message)
        run.refresh_from_db()
        dead.append(run)
    return dead


def pipeline_chain_send(run: PipelineRun, *, start: int = 0) -> None:
    """Queue the run's steps (from index start) as one Celery chain of run_step, each with its
    own task's time limits (eager: run them here). Raises what the broker raises."""
    signatures = []
    for step in run.steps.filter(index__gte=start).order_by("index"):
        task = import_string(step.task)  # the step's own task: only its time limits are read
        limits: dict[str, Any] = {
            "soft_time_limit": task.soft_time_limit or settings.CELERY_TASK_SOFT_TIME_LIMIT,
            "time_limit": task.time_limit or settings.CELERY_TASK_TIME_LIMIT,
        }
        signatures.append(
            task_signature(RUN_STEP_TASK, run.pk, step.index).set(immutable=True, **limits)
        )
    tasks_chain_send(*signatures)


def pipeline_launch(run: PipelineRun) -> None:
    """Queue the run's chain (eager: run it here). A broker that cannot be reached fails the
    run with that reason and raises PipelineQueueError; its month changes go back to wait."""
    try:
        pipeline_chain_send(run)
    except BrokerError as exc:
        error = f"could not queue the pipeline (broker unreachable): {exc}"
        pipeline_run_fail(run_id=run.pk, error=error)
        pipeline_changes_unclaim(run_id=run.pk)
        raise PipelineQueueError(error) from exc


def pipeline_start(*, months: list[dt.date], reason: str) -> list[PipelineRun]:
    """Start a run for each month (first days); raises PipelineQueueError when the broker is
    unreachable (the runs are recorded FAILED with that reason)."""
    runs = [pipeline_run_create(month=month, reason=reason) for month in sorted(set(months))]
    for run in runs:
        pipeline_launch(run)
    return runs


def pipeline_continue(*, run_id: int, start: int) -> None:
    """Queue the run's steps from index start (after a WAITING step was resumed). A broker
    that cannot be reached fails the run and raises."""
    run = PipelineRun.objects.get(pk=run_id)
    try:
        pipeline_chain_send(run, start=start)
    except BrokerError as exc:
        pipeline_run_fail(run_id=run.pk, error=f"could not queue the next steps: {exc}")
        raise


def pipeline_pending_start() -> dict[str, StartedRun]:
    """Claim the month changes settled imports recorded and start their runs; returns
    {"YYYY-MM": {"run", "status", "error"}} of the runs started (eager: already finished)."""
    started: dict[str, StartedRun] = {}
    for run in pipeline_changes_claim():
        try:
            pipeline_launch(run)
        except PipelineQueueError:
            logger.warning("pipeline run %s not queued; its months wait for the watchdog", run.pk)
            continue
        run.refresh_from_db()
        started[month_format(run.month)] = {
            "run": run.pk,
            "status": run.status,
            "error": run.error,
        }
    return started


def pipeline_open_months_start(*, today: dt.date) -> list[dt.date]:
    """Run the pipeline for the month of today and the previous one, those that have line
    items (providers restate both for weeks); returns the months started."""
    current = today.replace(day=1)
    months = [
        m
        for m in (month_previous(current), current)
        if CostLineItem.objects.settled().filter(billing_period=m).exists()
    ]
    pipeline_start(months=months, reason="nightly")
    return months


def pipeline_watchdog_sweep() -> WatchdogResult:
    """Fail work whose worker died (no heartbeat within FINOPS_WORKER_HEARTBEAT_TIMEOUT):
    import batches (their rows dropped, the previous data kept), attribution runs, pipeline
    runs. A pipeline run found dead is started again (up to MAX_ATTEMPTS runs in all): its
    steps are idempotent. Then start the pipeline for month changes nobody claimed (their
    wake-up message was lost)."""
    batches = import_batches_fail_dead()
    attributions = attribution_runs_fail_dead()
    retried: list[int] = []
    for dead in pipeline_runs_fail_dead():
        if dead.attempt >= MAX_ATTEMPTS:
            continue
        retry = pipeline_run_create(
            month=dead.month, reason=f"retry of run {dead.pk} ({dead.error})", retry_of=dead
        )
        try:
            pipeline_launch(retry)
        except PipelineQueueError:
            continue
        retried.append(retry.pk)
    started = [run["run"] for run in pipeline_pending_start().values()]
    return {
        "batches_failed": batches,
        "attribution_runs_failed": attributions,
        "pipeline_runs_retried": retried,
        "pipeline_runs_started": started,
    }
