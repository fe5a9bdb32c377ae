"""Attribution of a billing month, orchestrated: load the inputs (inputs.py), run the pure
engine (engine/), then check and write the ledger and its rollups (ledger.py), all in one
transaction with a heartbeat, so a failed or killed run leaves the month's previous rows.

Reads of the result are in ledger_selectors.py (the command's summary) and selectors.py (pages).
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from billing_ingest.faults import fault_point
from billing_ingest.heartbeat import dead_worker_message, heartbeat, heartbeat_deadline
from billing_ingest.months import month_start
from finops.attribution import engine, ledger
from finops.attribution.inputs import Inputs, inputs_load
from finops.attribution.models import AttributionRun
from finops.org.services import data_version_bump

logger = logging.getLogger(__name__)


def _attribute(month: dt.date, inputs: Inputs) -> None:
    """Split the inputs, check the ledger against the bill, then replace the month's rows."""
    shares = engine.attribute(inputs.lines, inputs.jobs)
    rows = ledger.aggregate(inputs, shares)
    del shares
    ledger.check_conservation(inputs, rows)
    ledger.write(month, inputs, rows)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a month is attributed. The run allocates millions of
    small tuples that all live until it ends; the collector would keep rescanning them (a third
    of the engine's time, growing faster than the month) and find nothing to free. Plain
    reference counting still frees everything; the collector resumes afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def attribution_run(*, month: dt.date) -> AttributionRun:
    """Attribute a billing month: replace its ledger and rollups in one transaction.

    Idempotent (same inputs, same rows). On error the run is recorded FAILED with the message,
    the month's previous rows stay as they were, and the error is re-raised. Runs of the month
    left RUNNING by a dead worker (no heartbeat) are marked FAILED first.
    """
    month = month_start(month)
    attribution_runs_fail_dead(month=month)
    run = AttributionRun.objects.create(billing_period=month, heartbeat_at=timezone.now())
    try:
        with heartbeat(lambda: _touch(run.pk)), transaction.atomic():
            _lock_month(month)
            AttributionRun.objects.filter(pk=run.pk).update(inputs_at=timezone.now())
            with _gc_paused():
                inputs, line_count = inputs_load(month=month)
                fault_point("attribute")
                _attribute(month, inputs)
            run.status = AttributionRun.Status.SUCCEEDED
            run.line_items = line_count
            run.jobs = len(inputs.jobs)
            run.finished_at = timezone.now()
            run.save(update_fields=["status", "line_items", "jobs", "finished_at"])
            data_version_bump()  # the new ledger and rollups: cached answers are stale
    except Exception as exc:
        logger.exception("attribution of %s failed", month)
        if isinstance(exc, OperationalError | InterfaceError) and not connection.in_atomic_block:
            connection.close()  # dropped: record the failure on a fresh connection
        AttributionRun.objects.filter(pk=run.pk, status=AttributionRun.Status.RUNNING).update(
            status=AttributionRun.Status.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            finished_at=timezone.now(),
        )
        run.refresh_from_db()
        raise
    return run


def _touch(run_id: int) -> None:
    AttributionRun.objects.filter(pk=run_id, status=AttributionRun.Status.RUNNING).update(
        heartbeat_at=timezone.now()
    )


def _lock_month(month: dt.date) -> None:
    """Serialise runs of one month: a second run waits here until the first commits, then
    deletes its rows instead of inserting beside them. An advisory lock rather than a lock on
    the runs' rows, so the heartbeat thread can still touch this run's row while it waits.
    SQLite serialises every write transaction already."""
    if connection.vendor != "postgresql":
        return
    key = int.from_bytes(hashlib.sha256(f"attribution:{month}".encode()).digest()[:8], "big")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key - 2**63])


def attribution_runs_fail_dead(*, month: dt.date | None = None) -> list[int]:
    """Mark FAILED the RUNNING runs (of one month, or all) whose worker stopped its heartbeat.
    Their transaction died with the worker: the month kept its previous ledger."""
    runs = AttributionRun.objects.filter(
        status=AttributionRun.Status.RUNNING, heartbeat_at__lt=heartbeat_deadline()
    )
    if month is not None:
        runs = runs.filter(billing_period=month_start(month))
    failed: list[int] = []
    for run_id, last in runs.values_list("id", "heartbeat_at"):
        updated = AttributionRun.objects.filter(
            pk=run_id, status=AttributionRun.Status.RUNNING, heartbeat_at=last
        ).update(
            status=AttributionRun.Status.FAILED,
            error=dead_worker_message(last),
            finished_at=timezone.now(),
        )
        if updated:
            logger.warning("attribution run %s failed: its worker died", run_id)
            failed.append(run_id)
    return failed
