"""PostgreSQL: the parts of a split month write the rows that are theirs alone into staging
tables, and the reduce holds only the rest (spread idle, shared costs, rows without a node)
plus sums; the ledger is the unsplit month's row for row. A failed reduce leaves the month's
previous ledger and no staging table; a redelivered part replaces its table."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction
from psycopg import pq

from finops.attribution import services
from finops.attribution.inputs.month import ResourceRange
from finops.attribution.ledger import staging
from finops.attribution.ledger import writer as ledger
from finops.attribution.ledger.partial import MonthLedger, PartResult
from finops.attribution.models import AllocatedCost, AttributionRun
from finops.attribution.services import (
    attribution_month_part,
    attribution_month_plan,
    attribution_month_reduce,
    attribution_month_run,
)
from tests.split_months import MONTH, scenario_build, snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("staging tables are PostgreSQL's (SQLite parts send every row)")


def _staging_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE starts_with(relname, %s)", [staging.PREFIX]
        )
        return sorted(name for (name,) in cursor.fetchall())


def _parts(stage: str, parts: int = 3) -> list[bytes]:
    plan = attribution_month_plan(month=MONTH, parts=parts)
    assert len(plan) == parts
    return [attribution_month_part(month=MONTH, part=part, stage=stage) for part in plan]


def _month_in_staged_parts() -> tuple[dict[str, Any], str, list[bytes]]:
    """The scenario attributed whole (its snapshot), then its 3 parts staged: their stage id
    and results, not yet reduced."""
    scenario_build()
    attribution_month_run(month=MONTH)
    whole = snapshot()
    stage = staging.stage_new(MONTH)
    return whole, stage, _parts(stage)


def _spy_reduce(monkeypatch: pytest.MonkeyPatch) -> list[MonthLedger]:
    seen: list[MonthLedger] = []
    real = services.month_ledger_reduce

    def spy(parts: Any) -> MonthLedger:
        seen.append(real(parts))
        return seen[-1]

    monkeypatch.setattr(services, "month_ledger_reduce", spy)
    return seen


def test_the_reduce_holds_only_the_rows_the_parts_did_not_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole, stage, results = _month_in_staged_parts()
    total = len(whole["AllocatedCost"])
    assert whole["TagCharge"]  # the budgets' sums: the parts' charge sums, merged
    assert len(_staging_tables()) == 3
    loaded = [PartResult.loads(data) for data in results]
    staged_rows = sum(part.staged.rows for part in loaded if part.staged is not None)
    sent_rows = sum(len(part.ledger) for part in loaded)
    assert staged_rows > sent_rows > 0  # node rows staged; rows without a node sent
    for part in loaded:  # what a part sends has no node, or is idle a pool-day may keep
        pending = {key for rows in part.pending.values() for key in rows}
        assert all(key[5] == "" or key in pending for key in part.ledger)
    seen = _spy_reduce(monkeypatch)
    attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert snapshot() == whole
    [reduced] = seen
    # The reduce merged, spread and wrote only the remainder; the staged rows went by the server.
    assert len(reduced.ledger) + staged_rows == total
    assert reduced.staged.rows == staged_rows
    assert len(reduced.ledger) < total / 2
    assert _staging_tables() == []


def test_a_reduce_delivered_again_after_it_committed_changes_nothing() -> None:
    whole, stage, results = _month_in_staged_parts()
    run = attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    runs = AttributionRun.objects.count()
    again = attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert again.pk == run.pk
    assert again.status == AttributionRun.Status.SUCCEEDED
    assert AttributionRun.objects.count() == runs  # no run recorded FAILED for the lost tables
    assert snapshot() == whole


def test_a_redelivered_part_replaces_its_staging_table() -> None:
    whole, stage, results = _month_in_staged_parts()
    part = attribution_month_plan(month=MONTH, parts=3)[0]
    results[0] = attribution_month_part(month=MONTH, part=part, stage=stage)  # delivered again
    assert len(_staging_tables()) == 3
    attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert snapshot() == whole


def test_a_failed_reduce_keeps_the_previous_ledger_and_drops_the_staging_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole, stage, results = _month_in_staged_parts()
    real_insert = ledger._insert

    def insert_then_fail(*args: Any, **kwargs: Any) -> None:
        real_insert(*args, **kwargs)  # the staged rows are in the ledger by now
        raise RuntimeError("the reduce dies while writing")

    monkeypatch.setattr(ledger, "_insert", insert_then_fail)
    with pytest.raises(RuntimeError, match="dies while writing"):
        attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert snapshot() == whole
    assert _staging_tables() == []
    newest = AttributionRun.objects.order_by("-id").first()
    assert newest is not None
    assert newest.status == AttributionRun.Status.FAILED


def test_a_reduce_that_lost_its_connection_keeps_the_tables_for_its_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole, stage, results = _month_in_staged_parts()
    real_insert = ledger._insert
    calls: list[int] = []

    def insert_dropped_once(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        real_insert(*args, **kwargs)

    monkeypatch.setattr(ledger, "_insert", insert_dropped_once)
    with pytest.raises(OperationalError):
        attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert len(_staging_tables()) == 3  # the task retries with them
    attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert snapshot() == whole
    assert _staging_tables() == []


def test_a_missing_staging_table_fails_the_run_and_the_month_keeps_its_ledger() -> None:
    whole, stage, results = _month_in_staged_parts()
    with connection.cursor() as cursor:
        cursor.execute(f'TRUNCATE "{_staging_tables()[0]}"')  # as a server crash empties it
    with pytest.raises(staging.StageMissingError):
        attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert snapshot() == whole
    assert _staging_tables() == []


def test_the_server_copies_the_staged_rows_while_the_reduce_merges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy into the month's fresh table is sent before the merge and collected after it
    (stage_copy.py): while the merge runs, the connection has a command in progress."""
    whole, stage, results = _month_in_staged_parts()
    during: list[pq.TransactionStatus] = []
    real = services.month_ledger_reduce

    def merge(parts: Any) -> MonthLedger:
        during.append(connection.connection.pgconn.transaction_status)
        return real(parts)

    monkeypatch.setattr(services, "month_ledger_reduce", merge)
    attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert during == [pq.TransactionStatus.ACTIVE]
    assert snapshot() == whole
    assert _staging_tables() == []


def test_a_merge_that_fails_while_the_copy_runs_keeps_the_month(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole, stage, results = _month_in_staged_parts()

    def merge_fails(parts: Any) -> MonthLedger:
        raise RuntimeError("the merge dies")

    monkeypatch.setattr(services, "month_ledger_reduce", merge_fails)
    with pytest.raises(RuntimeError, match="the merge dies"):
        attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    # The copy's results were collected: the connection rolled back and recorded the failure.
    newest = AttributionRun.objects.order_by("-id").first()
    assert newest is not None
    assert newest.status == AttributionRun.Status.FAILED
    assert snapshot() == whole
    assert _staging_tables() == []
    assert not _fresh_tables()


def test_a_staging_table_no_part_reported_fails_the_run() -> None:
    whole, stage, results = _month_in_staged_parts()
    stray = staging.stage_table(stage, ResourceRange("zz-not-in-the-plan", None))
    staging.stage_create(stray, ledger.ledger_names())
    with pytest.raises(staging.StageMissingError, match="no part reported"):
        attribution_month_reduce(month=MONTH, parts=results, stage=stage)
    assert snapshot() == whole
    assert _staging_tables() == []


def _fresh_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname LIKE '%%\\_next'")
        return [name for (name,) in cursor.fetchall()]


def test_staging_tables_a_killed_reduce_left_are_dropped_once_stale() -> None:
    scenario_build()
    stage = staging.stage_new(MONTH)
    _parts(stage, parts=2)
    assert staging.stages_drop_stale() == []  # a live run's
    later = staging.STALE.total_seconds() + 60
    assert len(staging.stages_drop_stale(time.time() + later)) == 2
    assert _staging_tables() == []


@pytest.mark.django_db(transaction=True)
def test_a_part_leaves_the_ledger_unlocked_while_it_runs() -> None:
    """A part's transaction holds no lock on the ledger or its partitions after creating its
    staging table: another month's reduce detaches its partition then, and would otherwise
    wait for the part, with every reader of the ledger queued behind it."""
    scenario_build()
    attribution_month_run(month=MONTH)  # the month's partition exists
    table = staging.stage_table(staging.stage_new(MONTH), ResourceRange())
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            staging.stage_create(table, ledger.ledger_names())
            cursor.execute(
                "SELECT relation::regclass::text FROM pg_locks WHERE pid = pg_backend_pid() "
                "AND relation::regclass::text LIKE %s",
                [f"{AllocatedCost._meta.db_table}%"],
            )
            assert cursor.fetchall() == []
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            assert cursor.fetchone()[0] == 0
    finally:
        staging.stages_drop_stale(now=time.time() + 10 * staging.STALE.total_seconds())
