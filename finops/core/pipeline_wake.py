"""The pipeline's wake/resume contract: wake it after a batch settled, resume it after a step's
handed-off work ended, without importing it.

It sits in finops/core, below every app: finops.pipeline (above attribution, inference, budgets,
anomalies) reads billing_ingest and attribution, never the other way, so they send its tasks by
name. A settled batch has already recorded its
months as MonthChange rows in the transaction that settled it; this only asks the pipeline to
claim them now rather than at the watchdog's next sweep (finops/celery.py). Sending the task by
name keeps the import graph one-way: if the message is lost (broker down, worker killed right
after the commit), the rows are still there and the sweep starts their pipeline.
"""

from __future__ import annotations

import logging
from typing import Any

from finops.core.queue import task_send

logger = logging.getLogger("finops.billing_ingest")

# finops.pipeline.tasks.start_pending_pipelines
PIPELINE_START_TASK = "finops.pipeline.start_pending"


def pipeline_kick(*, wait: float | None = None) -> dict[str, dict[str, Any]] | None:
    """Queue the pipeline's claim of pending month changes (run inline when Celery is eager,
    as the task is registered by name). With ``wait``, wait that long for the claim and return
    {"YYYY-MM": {"run", "status", "error"}} of the runs it started. Never raises: the import
    itself succeeded, and its months wait for the watchdog if this fails."""
    try:
        result = task_send(PIPELINE_START_TASK)
        if wait is None:
            return None
        outcome: dict[str, dict[str, Any]] = result.get(timeout=wait)
        return outcome
    except Exception:
        logger.warning("could not queue %s; the watchdog will", PIPELINE_START_TASK, exc_info=True)
        return None


# finops.pipeline.tasks.pipeline_resume: a step whose task handed its work to other tasks (its
# result carries STEP_WAITING: True, e.g. attribution split into a chord) is left WAITING; the
# last of those tasks sends this, by name, once its work has committed (or failed: `error`).
PIPELINE_RESUME_TASK = "finops.pipeline.resume"
STEP_WAITING = "pipeline_step_waiting"


def pipeline_resume_send(*, run_id: int, error: str = "") -> None:
    """Ask the pipeline to carry run_id on after its WAITING step (or to fail it with error).
    Raises when the broker is unreachable: the caller's task fails and is logged, and the
    watchdog fails the run after FINOPS_PIPELINE_QUEUED_TIMEOUT (then runs it again)."""
    task_send(PIPELINE_RESUME_TASK, run_id, error=error)


# finops.economics.tasks: the stored run economics of a month (of some of its runs), sent when
# run metrics or energy of the month were imported (the ledger did not change: no pipeline).
ECONOMICS_REFRESH_TASK = "finops.economics.tasks.refresh_run_economics"
ECONOMICS_REFRESH_RUNS_TASK = "finops.economics.tasks.refresh_run_economics_of_runs"


def economics_refresh_send(months: list[str], run_ids: list[str] | None = None) -> None:
    """Ask for the run economics of these months ("YYYY-MM") to be rebuilt (only the runs
    `run_ids` when given: an import of run metrics names its runs). Never raises: the import
    itself succeeded, and the next pipeline run of the month rebuilds them anyway."""
    for month in sorted(set(months)):
        try:
            if run_ids is None:
                task_send(ECONOMICS_REFRESH_TASK, month)
            elif run_ids:
                task_send(ECONOMICS_REFRESH_RUNS_TASK, month, sorted(set(run_ids)))
        except Exception:
            logger.warning("could not queue the run economics of %s", month, exc_info=True)
