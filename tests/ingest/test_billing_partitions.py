"""PostgreSQL: the line items are partitioned by billing month, then by import batch
(billing_ingest.loading.partitions). An import's rows become its own partition of each month they
belong to; a restatement drops the superseded batch's partition of the restated month and
nothing else; a failed import drops only its own loading tables; deleting a batch drops its
partitions. (SQLite has one plain table: the migration is a no-op there and rows are deleted.)"""

from __future__ import annotations

import datetime as dt
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import DatabaseError, connection, connections, transaction

from billing_ingest.loading.partitions import (
    DEFAULT,
    TABLE,
    batch_partition_attach,
    batch_table,
    batch_tables,
    month_table,
    months_ensure,
    part_table_create,
)
from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.services.batches import line_items_batch_delete
from billing_ingest.services.billing import BillingFile, billing_batch_create, billing_batch_ingest
from finops.core.months import month_format
from tests.builders import focus_row, write_focus_csv
from tests.factories import CostLineItemFactory, ImportBatchFactory

pytestmark = pytest.mark.django_db

SEP, OCT, DEC = dt.date(2024, 9, 1), dt.date(2024, 10, 1), dt.date(2024, 12, 1)


@pytest.fixture(autouse=True)
def _postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("declarative partitioning is PostgreSQL's")


def _row(month: dt.date, resource: str, cost: str) -> dict[str, str]:
    start = f"{month_format(month)}-05T10:00:00Z"
    end = f"{month_format(month)}-05T11:00:00Z"
    return focus_row(
        BillingPeriodStart=f"{month_format(month)}-01T00:00:00Z",
        BillingPeriodEnd="",
        ChargePeriodStart=start,
        ChargePeriodEnd=end,
        ResourceId=resource,
        ListCost=cost,
        BilledCost=cost,
        EffectiveCost=cost,
    )


def _import(tmp_path: Path, source: str, *parts: list[tuple[dt.date, str, str]]) -> ImportBatch:
    """One delivery of one or more parts; each part is rows of (month, resource, cost)."""
    files = []
    for rows in parts:
        path = tmp_path / f"{source}-{len(list(tmp_path.iterdir()))}.csv"
        write_focus_csv(path, [_row(*row) for row in rows])
        files.append(BillingFile(path=path, label=path.name))
    batch = billing_batch_create(format="focus", source=source, files=files)
    return billing_batch_ingest(batch_id=batch.pk)


def _children(parent: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass",
            [parent],
        )
        return {name.strip('"') for (name,) in cursor.fetchall()}


def _rows_in(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT count(*) FROM "{table}"')
        (count,) = cursor.fetchone()
    return int(count)


def _total(**filters: object) -> Decimal:
    costs = CostLineItem.objects.filter(**filters).values_list("effective_cost", flat=True)
    return sum(costs, Decimal(0))


def _ids(**filters: object) -> set[int]:
    return set(CostLineItem.objects.filter(**filters).values_list("id", flat=True))


def test_each_month_of_an_import_becomes_the_batch_partition_of_that_month(
    tmp_path: Path,
) -> None:
    batch = _import(tmp_path, "acme", [(SEP, "r1", "10"), (SEP, "r2", "5"), (OCT, "r3", "7")])
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert {month_table(SEP), month_table(OCT)} <= _children(TABLE)
    assert batch_table(SEP, batch.pk) in _children(month_table(SEP))
    assert batch_table(OCT, batch.pk) in _children(month_table(OCT))
    assert _rows_in(batch_table(SEP, batch.pk)) == 2
    assert _rows_in(batch_table(OCT, batch.pk)) == 1
    # The loading tables became the partitions: none is left behind.
    assert batch_tables(batch_id=batch.pk) == sorted(
        [batch_table(SEP, batch.pk), batch_table(OCT, batch.pk)]
    )
    assert _total(billing_period=SEP) == Decimal(15)
    ids = list(CostLineItem.objects.values_list("id", flat=True))
    assert len(ids) == len(set(ids)) == 3
    assert CostLineItem.objects.get(pk=ids[0]).pk == ids[0]  # the ORM's primary key still works


def test_parts_of_one_delivery_make_one_partition_per_month(tmp_path: Path) -> None:
    batch = _import(tmp_path, "acme", [(SEP, "r1", "1.25")], [(SEP, "r2", "2.5")])
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert batch_tables(batch_id=batch.pk) == [batch_table(SEP, batch.pk)]
    assert _rows_in(batch_table(SEP, batch.pk)) == 2
    assert _total(batch=batch) == Decimal("3.75")


def test_a_restatement_replaces_exactly_the_superseded_batch_partition(tmp_path: Path) -> None:
    v1 = _import(tmp_path, "acme", [(SEP, "r1", "10"), (SEP, "r2", "5"), (OCT, "r3", "7")])
    other = _import(tmp_path, "gcp", [(SEP, "g1", "3")])
    other_ids, october_ids = _ids(batch=other), _ids(billing_period=OCT)

    v2 = _import(tmp_path, "acme", [(SEP, "r1", "11.5")])

    assert v2.status == ImportBatch.Status.SUCCEEDED
    september = _children(month_table(SEP))
    assert batch_table(SEP, v1.pk) not in september  # dropped, not emptied row by row
    assert {batch_table(SEP, v2.pk), batch_table(SEP, other.pk)} <= september
    # v1 keeps October, which v2 does not hold: it is not superseded.
    assert batch_table(OCT, v1.pk) in _children(month_table(OCT))
    v1.refresh_from_db()
    assert v1.status == ImportBatch.Status.SUCCEEDED
    assert _total(billing_period=SEP) == Decimal("14.5")  # v2's 11.5 + gcp's 3
    assert _ids(batch=other) == other_ids
    assert _ids(billing_period=OCT) == october_ids
    assert _total(billing_period=OCT) == Decimal(7)


def test_a_restatement_of_every_month_supersedes_the_old_batch(tmp_path: Path) -> None:
    v1 = _import(tmp_path, "acme", [(SEP, "r1", "10")])
    v2 = _import(tmp_path, "acme", [(SEP, "r1", "12")])
    v1.refresh_from_db()
    assert v1.status == ImportBatch.Status.SUPERSEDED
    assert v1.superseded_by_id == v2.pk
    assert batch_tables(batch_id=v1.pk) == []
    assert _total() == Decimal(12)


def test_a_failed_import_keeps_the_previous_partition_and_drops_its_own_tables(
    tmp_path: Path,
) -> None:
    v1 = _import(tmp_path, "acme", [(SEP, "r1", "10"), (SEP, "r2", "5")])
    before = _ids()
    # Part 1 loads (its table is made and filled), part 2 has a cost that is not a number.
    bad = tmp_path / "bad.csv"
    write_focus_csv(bad, [_row(SEP, "r1", "not-a-number")])
    good = write_focus_csv(tmp_path / "good.csv", [_row(SEP, "r1", "99")])
    batch = billing_batch_create(
        format="focus",
        source="acme",
        files=[BillingFile(path=good, label="good.csv"), BillingFile(path=bad, label="bad.csv")],
    )
    v2 = billing_batch_ingest(batch_id=batch.pk)

    assert v2.status == ImportBatch.Status.FAILED
    assert "bad.csv" in v2.error
    assert batch_tables(batch_id=v2.pk) == []
    assert _ids() == before
    assert _total() == Decimal(15)
    assert batch_table(SEP, v1.pk) in _children(month_table(SEP))
    v1.refresh_from_db()
    assert v1.status == ImportBatch.Status.SUCCEEDED


def test_deleting_a_batch_drops_its_partitions_and_its_rows_elsewhere(tmp_path: Path) -> None:
    kept = _import(tmp_path, "gcp", [(SEP, "g1", "3"), (OCT, "g2", "4")])
    gone = _import(tmp_path, "acme", [(SEP, "r1", "10")])
    # A row of the batch in a month it has no partition of, written outside an import (an
    # admin tool): it lands in the month's DEFAULT partition.
    CostLineItemFactory(batch=gone, billing_period=OCT, effective_cost=Decimal(1))
    assert _rows_in(f"{month_table(OCT)}_default") == 1

    line_items_batch_delete(batch_id=gone.pk)

    assert batch_tables(batch_id=gone.pk) == []
    assert batch_table(SEP, gone.pk) not in _children(month_table(SEP))
    assert not CostLineItem.objects.filter(batch=gone).exists()
    assert batch_table(SEP, kept.pk) in _children(month_table(SEP))
    assert _total() == Decimal(7)


def test_rows_written_before_their_month_has_a_table_move_into_it(tmp_path: Path) -> None:
    outside = ImportBatchFactory(source="manual")
    CostLineItemFactory(batch=outside, billing_period=DEC, effective_cost=Decimal("2.5"))
    assert _rows_in(DEFAULT) == 1

    batch = _import(tmp_path, "acme", [(DEC, "r1", "4")])

    assert _rows_in(DEFAULT) == 0
    assert _rows_in(f"{month_table(DEC)}_default") == 1
    assert _rows_in(batch_table(DEC, batch.pk)) == 1
    assert _total(billing_period=DEC) == Decimal("6.5")


def _index_names(table: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [table])
        return sorted(name for (name,) in cursor.fetchall())


def test_a_batch_partition_indexes_are_named_after_it(tmp_path: Path) -> None:
    """PostgreSQL's own names drop the month and the batch (table and columns cut to 63
    characters: "billing_ingest_costlineitem_m_billing_period_provider_name_idx4")."""
    batch = _import(tmp_path, "acme", [(SEP, "r1", "10"), (OCT, "r2", "5")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass", [TABLE])
        (count,) = cursor.fetchone()
    assert count == 5  # the primary key and four indexes
    for month in (SEP, OCT):
        table = batch_table(month, batch.pk)
        assert _index_names(table) == sorted(
            [f"{table}_pkey", *(f"{table}_i{n}" for n in range(count - 1))]
        )


@pytest.mark.django_db(transaction=True)
def test_two_months_indexed_at_the_same_time_both_commit() -> None:
    """Two imports of different months finish at once (each holds only its month's lock),
    released together just before their first statement that builds indexes (the ATTACH, or
    the CREATE INDEXes before it): both commit, round after round. PostgreSQL checks that a
    name it picks is free, then inserts it; two sessions picking in the same instant took the
    same cut name and the second failed on pg_class_relname_nsp_index (before the batch's
    indexes were named: 7 runs of 8 failed here, 1 to 12 rounds in 60). A month's table made
    by one import does not race another's ATTACH: months_ensure's lock on the root is taken
    on every month's table too, and the ATTACH waits for it."""
    with transaction.atomic():
        months_ensure(months={SEP, OCT})
    work: list[list[int]] = [[], []]
    for _ in range(60):
        for side, (source, month) in enumerate((("acme", SEP), ("gcp", OCT))):
            batch = ImportBatchFactory.create(source=source)
            part_table_create(month=month, batch_id=batch.pk, index=0)
            work[side].append(batch.pk)
    together = threading.Barrier(2, timeout=30)
    failed: list[str] = []

    def finish(month: dt.date, batch_ids: list[int]) -> None:
        waited: list[int] = []

        def at_the_first_index_build(execute: Any, sql: str, *args: Any) -> Any:
            if len(waited) == round_ and ("ATTACH PARTITION" in sql or "CREATE INDEX" in sql):
                waited.append(round_)
                together.wait()
            return execute(sql, *args)

        try:
            with connection.execute_wrapper(at_the_first_index_build):
                for round_, batch_id in enumerate(batch_ids):
                    try:
                        with transaction.atomic():
                            batch_partition_attach(month=month, batch_id=batch_id)
                    except DatabaseError as exc:
                        failed.append(f"round {round_}: {exc}")
                    together.wait()  # both rounds over: the next starts together
        finally:
            connections.close_all()

    runs = [
        threading.Thread(target=finish, args=(month, batch_ids))
        for month, batch_ids in zip((SEP, OCT), work, strict=True)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert failed == []
