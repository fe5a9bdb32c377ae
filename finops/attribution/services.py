"""Attribution of a billing month, orchestrated: load the inputs (inputs/month.py), run the pure
engine (engine/), sum the shares (ledger/partial.py), then check and write the ledger and its
rollups (ledger/writer.py), all in one transaction with a heartbeat, so a failed or killed run
leaves the month's previous rows.

The month is computed in one process (attribution_month_run, the embedded default) or in parts
(attribution_month_plan, then attribution_month_part for each part, possibly on several workers,
then attribution_month_reduce); both write the same ledger to the last decimal.

Reads of the result are in selectors/ledger.py (the command's summary) and selectors/ (pages).
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Count
from django.utils import timezone

from billing_ingest.models import CostLineItem
from finops.attribution.inputs.charge_rollups import ChargeSums
from finops.attribution.inputs.month import (
    Inputs,
    MonthScope,
    ResourceRange,
    inputs_load,
    month_scope_load,
)
from finops.attribution.ledger import staging
from finops.attribution.ledger import writer as ledger
from finops.attribution.ledger.partial import (
    MonthLedger,
    PartResult,
    direct_spend,
    month_ledger_reduce,
    part_first_pass,
    stage_pick,
)
from finops.attribution.ledger.partitions import ledger_partition_ensure
from finops.attribution.ledger.rollup_sums import daily_sums
from finops.attribution.ledger.stage_copy import staged_rows_meanwhile
from finops.attribution.ledger.staged import Staged
from finops.attribution.models import AttributionRun, IdleShowbackMonth, IdleShowbackRow
from finops.attribution.selectors.idle_showback import FIGURES, idle_showback
from finops.core.faults import fault_point
from finops.core.heartbeat import dead_worker_message, heartbeat, heartbeat_deadline
from finops.core.months import month_start
from finops.core.phases import phase_clock, phase_mark
from finops.org.models import Team
from finops.org.services import data_version_bump

logger = logging.getLogger(__name__)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a month is attributed. The run allocates millions of
    small tuples that all live until it ends; the collector would keep rescanning them (a third
    of the engine's time, growing faster than the month) and find nothing to free. Plain
    reference counting still frees everything; the collector resumes afterwards.

    The block should hold its data in a function it calls, freed by the time it ends: the
    collector's first pass after resuming traverses every object still alive that was made
    meanwhile (1.2 s of a part's 55 s at 10,000 nodes), all about to be freed anyway."""
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
        phase_mark("inputs")
        fault_point("attribute")
        part = part_first_pass(inputs)
        phase_mark("first_pass")
        reduced = month_ledger_reduce([part])
        phase_mark("reduce")
        return reduced

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


def attribution_month_parts_count(*, month: dt.date, line_items_per_part: int) -> int:
    """How many parts the month needs so that none holds more than `line_items_per_part` of its
    settled line items (a part's memory grows with its line items: bench/README)."""
    lines = CostLineItem.objects.settled().filter(billing_period=month_start(month)).count()
    return max(1, math.ceil(lines / max(1, line_items_per_part)))


def attribution_month_scope(*, month: dt.date, plan: list[ResourceRange]) -> MonthScope | None:
    """What the plan's parts read alike (inputs.MonthScope), read once to hand to each; None
    for a month in one part, which reads its own."""
    return month_scope_load(month=month_start(month)) if len(plan) > 1 else None


def attribution_month_part(
    *,
    month: dt.date,
    part: ResourceRange,
    stage: str | None = None,
    scope: MonthScope | None = None,
) -> bytes:
    """One part of a month's attribution (partial.PartResult, serialised), with the budgets'
    charge sums of its line items. With a stage id (staging.stage_new) on PostgreSQL, the part
    writes the ledger rows that are its alone into its staging table (replacing what a
    previous delivery wrote there) and sends only their sums (staged.py); else it writes
    nothing but the teams the part's rows name (created once, whoever comes first). scope:
    the month's (inputs.MonthScope) as the plan read it, else read by the part."""
    with transaction.atomic(), _gc_paused():
        return _part_computed(month_start(month), part, stage, scope)


def _part_computed(
    month: dt.date, part: ResourceRange, stage: str | None, scope: MonthScope | None
) -> bytes:
    charges = ChargeSums()
    inputs, _ = inputs_load(month=month, part=part, charges=charges, scope=scope)
    fault_point("attribution_part")
    result = part_first_pass(inputs)
    result.staged = Staged(charges=charges)
    if stage is not None and staging.available():
        table = staging.stage_table(stage, part)
        _part_stage(month, inputs, result, table)
    return result.dumps()


def _part_stage(month: dt.date, inputs: Inputs, result: PartResult, table: str) -> None:
    """Write the part's own rows (partial.stage_pick) into its staging table; keep their sums."""
    rows = stage_pick(result)
    staged = result.staged
    assert staged is not None
    staged.tables = [(table, len(rows))]
    staged.allocated = ledger.allocated_sums(inputs.dims, rows)
    staged.daily = daily_sums(inputs.dims, rows)
    staged.runs = ledger.ledger_run_sums(inputs, rows)
    direct_spend(rows, inputs.dims, staged.spend, staged.gpu)
    ledger.stage_write(table, month, inputs, rows)


def attribution_month_parts_failed(
    *, month: dt.date, errors: Sequence[str], stage: str | None = None
) -> AttributionRun:
    """Record a run of the month FAILED because parts of it failed (their errors), as a failed
    attribution_month_run is recorded: the month keeps its previous ledger, and the staging
    tables of the run's other parts are dropped. Raises PartsFailedError."""

    def failed() -> MonthLedger:
        raise PartsFailedError("; ".join(errors))

    with _stages_dropped(stage):
        return _recorded_run(month, failed)


@contextmanager
def _stages_dropped(stage: str | None) -> Iterator[None]:
    """Drop a split run's staging tables when its reduce ends, committed or failed (outside
    its transaction: a failed one has rolled back), and any a killed reduce left behind. Not
    after a dropped database connection: the reduce task retries with the same tables (and
    drops them when it gives up: attribution_month_stages_drop)."""
    try:
        yield
    except (OperationalError, InterfaceError):
        raise
    except BaseException:
        attribution_month_stages_drop(stage=stage)
        raise
    attribution_month_stages_drop(stage=stage)


def attribution_month_stages_drop(*, stage: str | None) -> None:
    """Drop a split run's staging tables (staging.py), and any older than staging.STALE. A
    failure to drop them is logged, not raised: a later reduce drops them once stale."""
    try:
        if stage is not None:
            staging.stages_drop(stage)
        staging.stages_drop_stale()
    except (OperationalError, InterfaceError):
        logger.warning("staging tables of %s not dropped", stage, exc_info=True)
        connection.close()


def attribution_month_reduce(
    *, month: dt.date, parts: Iterable[bytes], stage: str | None = None
) -> AttributionRun:
    """Merge the parts of a month (attribution_month_part), check and write its ledger and
    rollups, as attribution_month_run does; the rows the parts staged are copied into the
    ledger on the server, in the same transaction, and their tables dropped at the end. The
    parts must cover the month's settled line items as they are now: a batch settled since
    they were read fails the run."""
    month = month_start(month)
    done = _reduced_already(month, stage)
    if done is not None:
        return done

    def merged() -> MonthLedger:
        # The server copies the staged rows into the month's fresh table meanwhile.
        copying = staged_rows_meanwhile(month=month, stage=stage, columns=ledger.ledger_names())
        with copying as copy, _gc_paused():
            # One part decompressed at a time: each is freed once merged.
            reduced = month_ledger_reduce(PartResult.loads(data) for data in parts)
            phase_mark("reduce")
            if copy is not None:
                reduced.fresh = copy.collect(reduced.staged.tables)
                phase_mark("staged_rows_copy")
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

    with _stages_dropped(stage):
        return _recorded_run(month, merged)


def _reduced_already(month: dt.date, stage: str | None) -> AttributionRun | None:
    """A reduce delivered again after its first delivery committed and dropped the staging
    tables (its worker died before the broker had its answer): the run of the month that
    succeeded since the parts were planned, rather than a run recorded FAILED for tables that
    are gone. None when any of the tables is left (the reduce runs) or no such run exists."""
    if stage is None or not staging.available() or staging.stage_tables(stage):
        return None
    return (
        AttributionRun.objects.filter(
            billing_period=month,
            status=AttributionRun.Status.SUCCEEDED,
            started_at__gte=staging.stage_began(stage),
        )
        .order_by("-id")
        .first()
    )


def attribution_month_run_split(*, month: dt.date, parts: int) -> AttributionRun:
    """attribution_month_run computed part by part in this process (what the chord of
    tasks.attribute_month does on workers): the same ledger, to the last decimal."""
    plan = attribution_month_plan(month=month, parts=parts)
    stage = staging.stage_new(month_start(month))
    scope = attribution_month_scope(month=month, plan=plan)
    results = [
        attribution_month_part(month=month, part=part, stage=stage, scope=scope) for part in plan
    ]
    return attribution_month_reduce(month=month, parts=results, stage=stage)


class PartsOutdatedError(RuntimeError):
    """The month's line items changed between reading the parts and merging them."""


class PartsFailedError(RuntimeError):
    """A part of the month failed (its error, as the part task reported it)."""


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
        with heartbeat(lambda: _touch(run.pk)), transaction.atomic(), phase_clock() as clock:
            _lock_month(month)
            phase_mark("lock_wait")
            # When the inputs were read, saved with the result: updating the run's row now
            # would lock it to the commit, and the heartbeat thread's updates of it would wait
            # there (a run longer than the heartbeat timeout then looked dead to the watchdog,
            # whose own update waited on the same lock).
            run.inputs_at = timezone.now()
            with _gc_paused():
                run.line_items, run.jobs = _ledger_written(month, compute, charges)
            idle_showback_store(month=month)
            phase_mark("idle_showback")
            run.status = AttributionRun.Status.SUCCEEDED
            run.finished_at = timezone.now()
            run.phases = clock.seconds()
            run.save(
                update_fields=["status", "line_items", "jobs", "finished_at", "inputs_at", "phases"]
            )
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


def _ledger_written(
    month: dt.date, compute: Callable[[], MonthLedger], charges: ChargeSums | None
) -> tuple[int, int]:
    """compute's ledger, checked and written (_recorded_run); the line items and jobs it
    counted. Its data is freed when this returns, before the collector resumes (_gc_paused)."""
    reduced = compute()
    staged = reduced.staged
    ledger.check_conservation(reduced.bill, reduced.dims, reduced.ledger, staged.allocated)
    phase_mark("conservation_check")
    rows = Inputs(dims=reduced.dims, job_meta=reduced.job_meta)
    ledger.write(
        month, rows, reduced.ledger, charges=charges or staged.charges, staged=staged,
        fresh=reduced.fresh,
    )  # fmt: skip
    return reduced.line_items, reduced.jobs


def idle_showback_store(*, month: dt.date) -> int:
    """Replace the month's stored idle showback (IdleShowbackMonth) with every team's, from the
    month's ledger as it is now; the number of rows. In the attribution's transaction, so the
    pages never read a ledger and a showback of two different runs."""
    rows = idle_showback(month=month, teams=Team.objects.all())
    IdleShowbackMonth.objects.filter(billing_period=month).delete()
    stored = IdleShowbackMonth.objects.create(billing_period=month)
    IdleShowbackRow.objects.bulk_create(
        [
            IdleShowbackRow(
                month=stored, team=r.team, currency=r.currency,
                **{name: getattr(r, name) for name in FIGURES},
            )
            for r in rows
        ],
        batch_size=500,
    )  # fmt: skip
    return len(rows)


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
