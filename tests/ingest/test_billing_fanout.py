"""A billing delivery fans out: one batch, one task per export file part, joined by a chord whose
callback swaps the batch in atomically, or fails it leaving the previous data in place.

The s3:// deliveries run against moto in server mode (the fixtures of test_ingest_uris); the
chord runs eagerly here (no broker) and through a real worker in test_worker_e2e.
"""

from __future__ import annotations

import gzip
import io
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch, ImportBatchPart
from billing_ingest.services.billing import (
    BillingFile,
    billing_batch_create,
    billing_batch_finish,
    billing_batch_start,
    billing_part_ingest,
)
from billing_ingest.tasks import billing as billing_tasks
from finops.attribution.selectors.reconciliation import reconciliation_for_month
from finops.core.months import month_format
from tests.builders import focus_row
from tests.builders import write_focus_csv as write_csv
from tests.clock import Clock
from tests.cur_s3_deliveries import CUR_HEADER as HEADER
from tests.cur_s3_deliveries import S3_BUCKET as BUCKET
from tests.cur_s3_deliveries import S3_SOURCE as SOURCE
from tests.cur_s3_deliveries import costs_sum, deliver, ledger, loaded_rows, month_total
from tests.cur_s3_deliveries import ingest_s3 as ingest

pytestmark = pytest.mark.django_db

SEPTEMBER = date(2024, 9, 1)


def billed(month: date = SEPTEMBER) -> Decimal:
    """What reconciliation shows as the month's bill (EffectiveCost, USD)."""
    return reconciliation_for_month(month=month).total.amortised


def batch_of(keys: list[str]) -> ImportBatch:
    labels = [f"s3://{BUCKET}/{key}" for key in keys]
    part = ImportBatchPart.objects.get(label=labels[0])
    return part.batch


def download(s3: Any, keys: list[str], folder: Path) -> list[BillingFile]:
    """The parts of a delivery as the command downloads them (the same bytes, same labels)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for index, key in enumerate(keys):
        local = folder / f"part-{index}.csv.gz"
        s3.download_file(BUCKET, key, str(local))
        files.append(BillingFile(local, f"s3://{BUCKET}/{key}"))
    return files


def test_three_parts_load_as_one_batch_whose_totals_are_the_sum_of_the_parts(s3: Any) -> None:
    parts = [["1.25", "2.50"], ["3.125"], ["0.000001", "4", "5.5"]]
    keys = deliver(s3, "2024-09", "v1", parts)

    ingest()

    batch = ImportBatch.objects.get()
    loaded = list(batch.parts.order_by("index"))
    assert batch.status == ImportBatch.Status.SUCCEEDED
    assert [p.label for p in loaded] == [f"s3://{BUCKET}/{key}" for key in keys]
    assert [p.status for p in loaded] == [ImportBatchPart.Status.SUCCEEDED] * 3
    # Each part recorded its own rows and totals; the batch holds their sums.
    assert [p.row_count for p in loaded] == [len(costs) for costs in parts]
    assert [Decimal(p.currency_totals["USD"]["effective"]) for p in loaded] == [
        costs_sum([costs]) for costs in parts
    ]
    assert batch.row_count == sum(len(costs) for costs in parts)
    assert Decimal(batch.currency_totals["USD"]["effective"]) == costs_sum(parts)
    assert batch.currency_totals["USD"]["rows"] == batch.row_count
    assert batch.billing_periods == ["2024-09"]
    assert CostLineItem.objects.filter(batch=batch).count() == batch.row_count
    assert month_total("2024-09") == billed() == costs_sum(parts)


def test_one_task_per_part_then_one_callback(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [["1.00"], ["2.00"], ["3.00"]]
    deliver(s3, "2024-09", "v1", parts)
    calls: list[tuple[str, int]] = []
    part_task, finish_task = billing_tasks.billing_part_ingest, billing_tasks.billing_batch_finish

    def part_spy(*, part_id: int) -> object:
        calls.append(("part", part_id))
        return part_task(part_id=part_id)

    def finish_spy(*, batch_id: int) -> object:
        calls.append(("finish", batch_id))
        return finish_task(batch_id=batch_id)

    monkeypatch.setattr(billing_tasks, "billing_part_ingest", part_spy)
    monkeypatch.setattr(billing_tasks, "billing_batch_finish", finish_spy)

    ingest()

    batch = ImportBatch.objects.get()
    part_ids = list(batch.parts.order_by("index").values_list("id", flat=True))
    assert calls == [("part", i) for i in part_ids] + [("finish", batch.pk)]


def test_a_failing_part_fails_the_batch_naming_it_and_keeps_the_old_month(
    s3: Any, s3_clock: Clock
) -> None:
    old = [["1.00", "2.00"], ["3.00"]]
    deliver(s3, "2024-09", "v1", old)
    ingest()
    before = ledger()
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    keys = deliver(s3, "2024-09", "v2", [["10.00"], ["20.00", "not-a-number"], ["30.00"]])

    with pytest.raises(CommandError) as raised:
        ingest()

    batch = batch_of(keys)
    assert batch.status == ImportBatch.Status.FAILED
    # The error names the part, its file (the S3 key), the row and the column.
    assert batch.error.startswith("part 2 of 3: ")
    assert f"file s3://{BUCKET}/{keys[1]}, row 3, column line_item_unblended_cost" in batch.error
    assert batch.error in str(raised.value)
    statuses = list(batch.parts.order_by("index").values_list("status", flat=True))
    assert statuses == ["succeeded", "failed", "succeeded"]
    # Parts 1 and 3 loaded, but none of the new batch's rows remain; the old month is intact.
    assert loaded_rows(batch.pk) == 0
    assert ledger() == before
    assert month_total("2024-09") == billed() == costs_sum(old)
    assert ImportBatch.objects.filter(status=ImportBatch.Status.SUCCEEDED).count() == 1


def test_a_part_task_that_dies_fails_the_batch_through_the_chord_error_path(
    s3: Any, monkeypatch: pytest.MonkeyPatch, s3_clock: Clock
) -> None:
    old = [["1.00"]]
    deliver(s3, "2024-09", "v1", old)
    ingest()
    before = ledger()
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    keys = deliver(s3, "2024-09", "v2", [["10.00"], ["20.00"]])
    real = billing_tasks.billing_part_ingest

    def dies_on_part_2(*, part_id: int) -> object:
        if ImportBatchPart.objects.get(id=part_id).index == 1:
            raise RuntimeError("worker lost")  # what a killed or timed-out task looks like
        return real(part_id=part_id)

    monkeypatch.setattr(billing_tasks, "billing_part_ingest", dies_on_part_2)

    with pytest.raises(CommandError, match="import task did not finish"):
        ingest()

    batch = batch_of(keys)
    assert batch.status == ImportBatch.Status.FAILED
    assert batch.error == f"part 2 of 2: file s3://{BUCKET}/{keys[1]}: import task did not finish"
    assert loaded_rows(batch.pk) == 0
    assert ledger() == before


def test_a_redelivered_month_replaces_the_old_batch_atomically(
    s3: Any, monkeypatch: pytest.MonkeyPatch, s3_clock: Clock
) -> None:
    old = [["1.00", "2.00"], ["3.00"]]
    deliver(s3, "2024-09", "v1", old)
    ingest()
    first = ImportBatch.objects.get()
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    new = [["10.00"], ["20.00", "0.50"], ["30.00"]]
    keys = deliver(s3, "2024-09", "v2", new)
    # While the new delivery's parts load, the bill readers see stays the old delivery's.
    seen_between_parts: list[Decimal] = []
    real = billing_tasks.billing_part_ingest

    def part_then_look(*, part_id: int) -> object:
        part = real(part_id=part_id)
        seen_between_parts.append(billed())
        return part

    monkeypatch.setattr(billing_tasks, "billing_part_ingest", part_then_look)

    ingest()

    assert seen_between_parts == [costs_sum(old)] * len(new)
    first.refresh_from_db()
    second = batch_of(keys)
    assert first.status == ImportBatch.Status.SUPERSEDED
    assert first.superseded_by_id == second.pk
    assert second.status == ImportBatch.Status.SUCCEEDED
    assert loaded_rows(first.pk) == 0
    assert month_total("2024-09") == billed() == costs_sum(new)


def test_rows_of_an_interrupted_import_are_never_billed_and_go_on_the_next_run(
    s3: Any, tmp_path: Path, s3_clock: Clock
) -> None:
    old = [["1.00"]]
    deliver(s3, "2024-09", "v1", old)
    ingest()
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    new = [["10.00"], ["20.00"]]
    keys = deliver(s3, "2024-09", "v2", new)
    # The import of v2 is interrupted after its first part: the batch stays RUNNING.
    stale = billing_batch_create(
        format="aws-cur", source=SOURCE, files=download(s3, keys, tmp_path / "dl"), name="v2"
    )
    first_part = billing_batch_start(batch_id=stale.pk)[0]
    billing_part_ingest(part_id=first_part)
    stale.refresh_from_db()
    assert stale.status == ImportBatch.Status.RUNNING
    assert loaded_rows(stale.pk) == 1
    assert billed() == costs_sum(old)  # its rows are invisible to reconciliation

    ingest()  # the same delivery again

    stale.refresh_from_db()
    assert stale.status == ImportBatch.Status.FAILED
    rerun = ImportBatch.objects.get(status=ImportBatch.Status.SUCCEEDED)
    assert stale.error == (
        f"did not finish; the same delivery was imported again as batch {rerun.pk}"
    )
    assert rerun.file_sha256 == stale.file_sha256
    assert loaded_rows(stale.pk) == 0
    assert month_total("2024-09") == billed() == costs_sum(new)
    # A late finish of the abandoned batch changes nothing.
    assert billing_batch_finish(batch_id=stale.pk).status == ImportBatch.Status.FAILED
    assert month_total("2024-09") == costs_sum(new)


def test_a_restatement_sweeps_stale_rows_of_its_month(
    s3: Any, tmp_path: Path, s3_clock: Clock
) -> None:
    keys = deliver(s3, "2024-09", "v1", [["1.00"]])
    # An import of v1 was interrupted after its only part loaded: RUNNING, rows invisible.
    stale = billing_batch_create(
        format="aws-cur", source=SOURCE, files=download(s3, keys, tmp_path / "dl"), name="v1"
    )
    billing_part_ingest(part_id=billing_batch_start(batch_id=stale.pk)[0])
    assert billed() == 0
    # A different delivery of the month (not the same bytes) is imported next.
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    new = [["7.00"], ["8.00"]]
    deliver(s3, "2024-09", "v2", new)

    ingest()

    stale.refresh_from_db()
    assert stale.status == ImportBatch.Status.SUPERSEDED
    assert loaded_rows(stale.pk) == 0
    assert month_total("2024-09") == billed() == costs_sum(new)


def test_finish_is_idempotent(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    ingest()
    batch = ImportBatch.objects.get()
    rows = ledger()

    again = billing_batch_finish(batch_id=batch.pk)

    assert (again.status, again.finished_at) == (batch.status, batch.finished_at)
    assert ledger() == rows


def test_a_part_loaded_twice_loads_once(s3: Any, tmp_path: Path) -> None:
    keys = deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    batch = billing_batch_create(
        format="aws-cur", source=SOURCE, files=download(s3, keys, tmp_path / "dl")
    )
    part_ids = billing_batch_start(batch_id=batch.pk)

    for part_id in part_ids + part_ids:  # a redelivered task message
        billing_part_ingest(part_id=part_id)
    done = billing_batch_finish(batch_id=batch.pk)

    assert done.status == ImportBatch.Status.SUCCEEDED
    assert done.row_count == CostLineItem.objects.count() == 2


def test_a_single_file_is_a_delivery_of_one_part(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "bill.csv", [focus_row(), focus_row()])

    call_command("ingest_billing", "--format", "focus", str(path), stdout=io.StringIO())

    batch = ImportBatch.objects.get()
    part = batch.parts.get()
    assert (part.file_name, part.label) == (str(path.resolve()), "bill.csv")
    assert (batch.status, batch.row_count, part.row_count) == ("succeeded", 2, 2)
    assert batch.currency_totals == part.currency_totals


def test_a_local_folder_delivery_is_one_batch_of_its_parts(tmp_path: Path) -> None:
    folder = tmp_path / "acme-2024-09"
    folder.mkdir()
    write_csv(folder / "part-1.csv", [focus_row(BilledCost="1.5", EffectiveCost="1.5")])
    write_csv(folder / "part-2.csv", [focus_row(BilledCost="2.25", EffectiveCost="2.25")] * 2)

    call_command(
        "ingest_billing", "--format", "focus", "--delivery", str(folder), stdout=io.StringIO()
    )

    batch = ImportBatch.objects.get()
    assert batch.source == "focus:acme-2024-09"
    assert [p.label for p in batch.parts.order_by("index")] == ["part-1.csv", "part-2.csv"]
    assert (batch.status, batch.row_count) == (ImportBatch.Status.SUCCEEDED, 3)
    assert Decimal(batch.currency_totals["USD"]["effective"]) == Decimal("6.00")


def test_a_folder_delivery_whose_headers_differ_is_refused_before_anything_loads(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "delivery"
    folder.mkdir()
    write_csv(folder / "a.csv", [focus_row()])
    (folder / "b.csv.gz").write_bytes(gzip.compress(HEADER.encode()))

    with pytest.raises(CommandError, match=r"b\.csv\.gz: header differs from the first part"):
        call_command("ingest_billing", "--format", "focus", "--delivery", str(folder))

    assert not ImportBatch.objects.exists()
    assert not CostLineItem.objects.exists()


def test_readers_of_the_bill_see_only_settled_batches(tmp_path: Path) -> None:
    # A batch still loading its parts (or left running by a killed worker) is not the bill:
    # not in the month list, the reconciliation, nor a FOCUS export.
    import csv as csv_module

    from finops.attribution.selectors.overview import month_list_with_data
    from finops.attribution.selectors.reconciliation import reconciliation_for_month
    from tests.factories import MONTH, CostLineItemFactory, ImportBatchFactory

    CostLineItemFactory.create(effective_cost=Decimal("10"), billed_cost=Decimal("10"))
    loading = ImportBatchFactory.create(status=ImportBatch.Status.RUNNING)
    CostLineItemFactory.create(
        batch=loading, effective_cost=Decimal("99"), billed_cost=Decimal("99")
    )
    other_month = ImportBatchFactory.create(status=ImportBatch.Status.RUNNING)
    CostLineItemFactory.create(
        batch=other_month, billing_period=MONTH.replace(month=MONTH.month + 1)
    )

    assert month_list_with_data() == [MONTH]
    assert reconciliation_for_month(month=MONTH).total.amortised == Decimal("10")
    out = tmp_path / "month.csv"
    call_command("export_focus", "--month", month_format(MONTH), "--out", str(out))
    with out.open() as handle:
        rows = list(csv_module.DictReader(handle))
    assert [Decimal(r["EffectiveCost"]) for r in rows] == [Decimal("10")]
