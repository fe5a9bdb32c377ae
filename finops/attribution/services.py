"""Attribution of a billing month, orchestrated: load the inputs (inputs.py), run the pure
engine (engine/), sum the shares (partial.py), then check and write the ledger and its rollups
(ledger.py), all in one transaction with a heartbeat, so a failed or killed run leaves the
month's previous rows.

The month is computed in one process (attribution_month_run, the embedded default) or in parts
(attribution_month_plan, then attribution_month_part for each part, possibly on several workers,
then attribution_month_reduce); both write the same ledger to the last decimal.

Reads of the result are in ledger_selectors.py (the command's summary) and selectors.py (pages).
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Count
from django.utils import timezone

from billing_ingest.faults import fault_point
from billing_ingest.heartbeat import dead_worker_message, heartbeat, heartbeat_deadline
from billing_ingest.models import CostLineItem
from billing_ingest.months import month_start
from finops.attribution import engine, ledger
from finops.attribution.charge_rollups import ChargeSums
from finops.attribution.inputs import Inputs, ResourceRange, inputs_load
from finops.attribution.models import AttributionRun
from finops.attribution.partial import MonthLedger, PartResult, month_ledger_reduce, part_result
from finops.attribution.partitions import ledger_partition_ensure
from finops.org.services import data_version_bump

logger = logging.getLogger(__name__)


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


def attribution_month_run(*, month: dt.date) -> AttributionRun:
    """Attribute a billing month in this process: replace its ledger and rollups in one
    transaction. The whole month is one part (partial.py), reduced at once.

    Idempotent (same inputs, same rows). On error the run is recorded FAILED with the message,
    the month's previous rows stay as they were, and the error is re-raised. Runs of the month
    left RUNNING by a dead worker (no heartbeat) are marked FAILED first.
    """

    # The budget rollups, summed as the month's line items are read (no second read).
    charges = ChargeSums()

    def whole_month() -> MonthLedger:
        inputs, _ = inputs_load(month=month_start(month), charges=charges)
        fault_point("attribute")
        return month_ledger_reduce([_part_allocate(inputs)])

    return _recorded_run(month, whole_month, charges=charges)


def attribution_month_plan(*, month: dt.date, parts: int) -> list[ResourceRange]:
    """Cut the month's line items into at most `parts` parts of about as many line items, by
    billed resource (every line of a node in one part: partial.py). One part when the month
    has unused commitments: which pool their idle belongs to depends on every node line of
    the month (policies.CommitmentPools)."""
    lines = CostLineItem.objects.settled().filter(billing_period=month_start(month))
    if parts <= 1 or lines.filter(commitment_discount_status__iexact="unused").exists():
        return [ResourceRange()]
    counts = list(
        lines.order_by("resource_id")
        .values_list("resource_id")
        .annotate(n=Count("id"))
        .values_list("resource_id", "n")
    )
    total = sum(n for _, n in counts)
    bounds: list[str] = []
    seen = 0
    for resource_id, n in counts:
        # A new part starts at the first resource past the next 1/parts of the line items.
        if seen >= total * (len(bounds) + 1) / parts and len(bounds) < parts - 1:
            bounds.append(resource_id)
        seen += n
    edges: list[str | None] = [None, *bounds, None]
    return [ResourceRange(a, b) for a, b in itertools.pairwise(edges)]


def attribution_month_part(*, month: dt.date, part: ResourceRange) -> bytes:
    """One part of a month's attribution (partial.PartResult, serialised). Writes nothing but
    the teams the part's rows name (created once, whoever comes first)."""
    with transaction.atomic(), _gc_paused():
        inputs, _ = inputs_load(month=month_start(month), part=part)
        fault_point("attribution_part")
        return _part_allocate(inputs).dumps()


def attribution_month_parts_failed(*, month: dt.date, errors: Sequence[str]) -> AttributionRun:
    """Record a run of the month FAILED because parts of it failed (their errors), as a failed
    attribution_month_run is recorded: the month keeps its previous ledger. Raises
    PartsFailedError."""

    def failed() -> MonthLedger:
        raise PartsFailedError("; ".join(errors))

    return _recorded_run(month, failed)


def attribution_month_reduce(*, month: dt.date, parts: Iterable[bytes]) -> AttributionRun:
    """Merge the parts of a month (attribution_month_part), check and write its ledger and
    rollups, as attribution_month_run does. The parts must cover the month's settled line
    items as they are now: a batch settled since they were read fails the run."""
    month = month_start(month)

    def merged() -> MonthLedger:
        with _gc_paused():
            # One part decompressed at a time: each is freed once merged.
            reduced = month_ledger_reduce(PartResult.loads(data) for data in parts)
        settled = dict(
            CostLineItem.objects.settled()
            .filter(billing_period=month)
            .order_by()
            .values_list("batch_id")
            .annotate(n=Count("id"))
            .values_list("batch_id", "n")
        )
        if settled != reduced.batches:
            raise PartsOutdatedError(
                f"the parts read {reduced.batches} line items per batch, the month has {settled}"
            )
        return reduced

    return _recorded_run(month, merged)


def attribution_month_run_split(*, month: dt.date, parts: int) -> AttributionRun:
    """attribution_month_run computed part by part in this process (what the chord of
    tasks.attribute_month does on workers): the same ledger, to the last decimal."""
    plan = attribution_month_plan(month=month, parts=parts)
    results = [attribution_month_part(month=month, part=part) for part in plan]
    return attribution_month_reduce(month=month, parts=results)


class PartsOutdatedError(RuntimeError):
    """The month's line items changed between reading the parts and merging them."""


class PartsFailedError(RuntimeError):
    """A part of the month failed (its error, as the part task reported it)."""


def _part_allocate(inputs: Inputs) -> PartResult:
    shares = engine.allocate_lines(inputs.lines, inputs.jobs, horizon=inputs.horizon)
    return part_result(inputs, shares)


def _recorded_run(
    month: dt.date, compute: Callable[[], MonthLedger], *, charges: ChargeSums | None = None
) -> AttributionRun:
    """Run compute and write its ledger in one transaction, recorded as an AttributionRun
    (attribution_month_run's docstring). charges: the budget rollups compute summed, if it
    did (else ledger.write reads them)."""
    month = month_start(month)
    attribution_runs_fail_dead(month=month)
    # Before the run's transaction: attaching a new month's partition locks the ledger's parent
    # table (partitions.py); committed at once, it never waits for the run to finish.
    ledger_partition_ensure(month=month)
    run = AttributionRun.objects.create(billing_period=month, heartbeat_at=timezone.now())
    try:
        with heartbeat(lambda: _touch(run.pk)), transaction.atomic():
            _lock_month(month)
            AttributionRun.objects.filter(pk=run.pk).update(inputs_at=timezone.now())
            with _gc_paused():
                reduced = compute()
                ledger.check_conservation(reduced.bill, reduced.dims, reduced.ledger)
                rows = Inputs(dims=reduced.dims, job_meta=reduced.job_meta)
                ledger.write(month, rows, reduced.ledger, charges=charges)
            run.status = AttributionRun.Status.SUCCEEDED
            run.line_items = reduced.line_items
            run.jobs = reduced.jobs
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
