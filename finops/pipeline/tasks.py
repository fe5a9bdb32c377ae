"""Pipeline tasks: thin, each calls the pipeline's services (finops.pipeline.services starts
and queues runs; finops.pipeline.steps.step_run runs one step).

A run is ``chain(run_step(run, 0), run_step(run, 1), ...)`` over finops.pipeline.steps.STEPS,
queued by finops.pipeline.services.pipeline_launch.
run_step records the step, calls the step function (finops.core.steps) in-process with (month,
run id), and retries it on transient errors only; a step that fails ends the run and the steps
after it see that and do nothing. A step that hands its work to other tasks (its StepResult is
waiting, e.g. the attribution split into a chord of parts and a reduce) is left WAITING and the
chain stops there, so no worker sleeps waiting for the work; the last of those tasks sends
pipeline_resume, which claims the step once and queues the rest of the chain. All are acks_late
with reject_on_worker_lost: a worker killed mid-step leaves the message to be delivered again,
and the step runs again (each step is idempotent).
"""

from __future__ import annotations

import logging
from typing import Any, NotRequired, TypedDict

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from finops.core.heartbeat import heartbeat
from finops.core.months import month_format
from finops.core.pipeline_wake import PIPELINE_RESUME_TASK, PIPELINE_START_TASK
from finops.pipeline.models import PipelineStep
from finops.pipeline.selectors import pipeline_run_month
from finops.pipeline.services import (
    RUN_STEP_TASK,
    StartedRun,
    WatchdogResult,
    pipeline_continue,
    pipeline_open_months_start,
    pipeline_pending_start,
    pipeline_step_begin,
    pipeline_step_fail,
    pipeline_step_resume,
    pipeline_step_retrying,
    pipeline_step_succeed,
    pipeline_step_touch,
    pipeline_step_wait,
    pipeline_watchdog_sweep,
)
from finops.pipeline.steps import STEPS_BY_KEY, step_run

logger = logging.getLogger(__name__)

# Transient: worth the same call again a little later. Anything else (a bug, bad data, a
# conservation error, a time limit) fails the step at once.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    OperationalError,  # database connection dropped, server restarting, deadlock
    InterfaceError,  # database connection already closed
    BrokerError,  # broker unreachable while a step queues work
    ConnectionError,  # sockets: SMTP and HTTP servers unreachable or resetting
    TimeoutError,
)
MAX_RETRIES = 3
RETRY_BACKOFF = settings.FINOPS_PIPELINE_RETRY_SECONDS  # then x2, x4

_ACKS: dict[str, Any] = {"acks_late": True, "reject_on_worker_lost": True}


class StepTaskResult(TypedDict):
    """What run_step returns (the Celery result): the step and how it ended."""

    run: int
    index: int
    status: str  # "not run", "waiting", "succeeded", "failed"
    error: NotRequired[str]


class ResumeTaskResult(TypedDict):
    """What pipeline_resume returns: what pipeline_step_resume did."""

    run: int
    outcome: str
    next: int | None


@shared_task(bind=True, name=RUN_STEP_TASK, max_retries=MAX_RETRIES, **_ACKS)
def run_step(self: Task[Any, Any], pipeline_run_id: int, index: int) -> StepTaskResult:
    step = pipeline_step_begin(run_id=pipeline_run_id, index=index)
    if step is None:
        return {"run": pipeline_run_id, "index": index, "status": "not run"}
    month = pipeline_run_month(run_id=pipeline_run_id)
    if step.key not in STEPS_BY_KEY:
        return _failed(step, f"step {step.key!r} is no longer defined (finops.pipeline.steps)")
    logger.info("pipeline run %s %s: step %s (%s)", pipeline_run_id, month, step.key, step.task)
    retries = self.request.retries
    while True:
        try:
            with heartbeat(lambda: pipeline_step_touch(step_id=step.pk, run_id=pipeline_run_id)):
                result = step_run(step.key, month, pipeline_run_id)
        except TRANSIENT_ERRORS as exc:
            if isinstance(exc, OperationalError | InterfaceError):
                _close_broken_connection()
            error = f"{type(exc).__name__}: {exc}"
            if retries >= MAX_RETRIES:
                return _failed(step, error)
            pipeline_step_retrying(step_id=step.pk, error=error)
            if not self.request.is_eager:
                raise self.retry(exc=exc, countdown=RETRY_BACKOFF * 2**retries) from None
            # Eager (in-process, the embedded default): a retry queued as a message would be
            # run at once by Celery and raised past the chain; retry here instead.
            retries += 1
            pipeline_step_begin(run_id=pipeline_run_id, index=index)
            continue
        except Exception as exc:
            logger.exception("pipeline run %s step %s failed", pipeline_run_id, step.key)
            return _failed(step, f"{type(exc).__name__}: {exc}")
        if result.waiting:
            pipeline_step_wait(step_id=step.pk, run_id=pipeline_run_id)
            # The rest of the chain is queued by pipeline_resume when the handed-off work ends.
            self.request.chain = None
            return {"run": pipeline_run_id, "index": index, "status": "waiting"}
        pipeline_step_succeed(step_id=step.pk)
        return {"run": pipeline_run_id, "index": index, "status": "succeeded"}


# The step is marked WAITING as soon as its task returns: a resume that comes first asks again.
RESUME_RETRY_SECONDS = 2
RESUME_RETRIES = 150


@shared_task(
    bind=True, name=PIPELINE_RESUME_TASK, max_retries=RESUME_RETRIES, soft_time_limit=60,
    time_limit=90, **_ACKS,
)  # fmt: skip
def pipeline_resume(
    self: Task[Any, Any], pipeline_run_id: int, error: str = ""
) -> ResumeTaskResult:
    """The work a WAITING step handed off has committed (or failed: error): claim the step
    (exactly once, pipeline_step_resume) and queue the steps after it."""
    resumed = pipeline_step_resume(run_id=pipeline_run_id, error=error)
    if resumed.outcome == "not yet":
        raise self.retry(countdown=RESUME_RETRY_SECONDS)
    if resumed.next_index is not None:
        pipeline_continue(run_id=pipeline_run_id, start=resumed.next_index)
    return {"run": pipeline_run_id, "outcome": resumed.outcome, "next": resumed.next_index}


def _close_broken_connection() -> None:
    # Retry (or record the failure) on a fresh connection.
    if not connection.in_atomic_block:
        connection.close()


def _failed(step: PipelineStep, error: str) -> StepTaskResult:
    pipeline_step_fail(step_id=step.pk, error=error)
    return {"run": step.run_id, "index": step.index, "status": "failed", "error": error}


@shared_task(name=PIPELINE_START_TASK, soft_time_limit=60, time_limit=90, **_ACKS)
def start_pending_pipelines() -> dict[str, StartedRun]:
    """Claim the month changes settled imports recorded and start their runs; returns
    {"YYYY-MM": {"run", "status", "error"}} of the runs started (eager: already finished).
    Sent by name by billing_ingest after a batch settles, and run by the watchdog."""
    return pipeline_pending_start()


@shared_task(name="finops.pipeline.open_months", soft_time_limit=60, time_limit=120, **_ACKS)
def pipeline_open_months() -> list[str]:
    """Nightly: run the pipeline for the current and the previous month, those that have line
    items (providers restate both for weeks). One run per month: one failing month does not
    stop the other."""
    months = pipeline_open_months_start(today=timezone.now().date())
    return [month_format(m) for m in months]


@shared_task(name="finops.pipeline.watchdog", soft_time_limit=120, time_limit=180, **_ACKS)
def pipeline_watchdog() -> WatchdogResult:
    """Fail work whose worker died and start it again (finops.pipeline.services
    .pipeline_watchdog_sweep)."""
    return pipeline_watchdog_sweep()
