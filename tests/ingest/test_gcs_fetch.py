"""ingest_billing with a gs:// URI, end to end: the real google-cloud-storage client against
gcp-storage-emulator (a test dependency, started in-process, so these tests always run). BigQuery
billing exports in month folders of JSON-lines shards, a FOCUS CSV, restated months, a corrupt
shard, a missing bucket, nothing under the prefix; access refused (403) through a GCS JSON API
error response served to the real client by `responses`, since the emulator checks no access."""

from __future__ import annotations

import gzip
import io
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import responses
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.sources.uris import uri_scheme
from tests.builders import csv_text, focus_row
from tests.gcs_exports import GCS_BUCKET as BUCKET
from tests.gcs_exports import GCS_OCTOBER as OCTOBER
from tests.gcs_exports import GCS_ROOT as ROOT
from tests.gcs_exports import GCS_SEPTEMBER as SEPTEMBER
from tests.gcs_exports import GCS_SOURCE as SOURCE
from tests.gcs_exports import GCS_URI as URI
from tests.gcs_exports import export_month, jsonl, ledger_totals, month_records, uploaded
from tests.gcs_exports import gcs_totals as totals
from tests.gcs_exports import gcs_upload as upload

pytestmark = pytest.mark.django_db


def ledger() -> list[tuple[int, str, str, str]]:
    rows = CostLineItem.objects.order_by("id")
    return [(r.batch_id, r.source, str(r.billing_period), str(r.effective_cost)) for r in rows]


def ingest(uri: str = URI, *args: str, format: str = "gcp-bigquery") -> str:
    out = io.StringIO()
    call_command(
        "ingest_billing",
        "--format",
        format,
        uri,
        "--no-attribute",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def test_gs_is_a_storage_uri() -> None:
    assert uri_scheme("gs://bucket/prefix") == "gs"


def test_a_month_folder_of_shards_is_one_batch_per_month(bucket: Any) -> None:
    upload(bucket, f"{ROOT}/", b"")  # the console's "folder" placeholder
    export_month(bucket, f"{ROOT}/invoice_month=202409", SEPTEMBER)
    export_month(bucket, f"{ROOT}/2024-10", OCTOBER)

    ingest()

    batches = ImportBatch.objects.order_by("id")
    assert [(b.source, b.status, b.billing_periods) for b in batches] == [
        (SOURCE, ImportBatch.Status.SUCCEEDED, ["2024-09"]),
        (SOURCE, ImportBatch.Status.SUCCEEDED, ["2024-10"]),
    ]
    # Three shards, one batch: every row of every shard is there, none replaced another.
    assert batches[0].row_count == len(uploaded(*SEPTEMBER))
    assert ledger_totals(SOURCE, "2024-09") == totals(*SEPTEMBER)
    assert ledger_totals(SOURCE, "2024-10") == totals(*OCTOBER)


def test_a_focus_csv_object_is_imported(bucket: Any) -> None:
    rows = [
        focus_row(BilledCost="32.7726", EffectiveCost="30.1"),
        focus_row(BilledCost="0.000001", EffectiveCost="0.000001", ResourceId="i-0def"),
    ]
    name = upload(bucket, "focus/focus-cost-export.csv", csv_text(rows).encode())

    ingest(f"gs://{BUCKET}/focus", format="focus")

    batch = ImportBatch.objects.get()
    assert (batch.status, batch.row_count) == (ImportBatch.Status.SUCCEEDED, len(rows))
    # Outside a month folder the object is its own delivery, with its own source.
    assert batch.source == f"focus:gs://{BUCKET}/{name}"
    expected = (
        sum(Decimal(row["BilledCost"]) for row in rows),
        sum(Decimal(row["EffectiveCost"]) for row in rows),
    )
    assert ledger_totals(batch.source, "2024-09") == expected


def test_a_reexported_month_replaces_the_previous_rows(bucket: Any) -> None:
    old = export_month(bucket, f"{ROOT}/2024-09", SEPTEMBER)
    export_month(bucket, f"{ROOT}/2024-10", OCTOBER)
    ingest()
    first = {b.billing_periods[0]: b.pk for b in ImportBatch.objects.all()}

    # Re-exported with overwrite: fewer shards, other amounts.
    for name in old:
        bucket.delete_blob(name)
    restated = [jsonl(month_records("202409", [(100, -1), (0.5, 0)]))]
    export_month(bucket, f"{ROOT}/2024-09", restated)
    output = ingest()

    replaced = ImportBatch.objects.get(pk=first["2024-09"])
    assert replaced.status == ImportBatch.Status.SUPERSEDED
    assert replaced.superseded_by is not None
    assert replaced.superseded_by.source == SOURCE
    assert ledger_totals(SOURCE, "2024-09") == totals(*restated)
    # October's bytes did not change: the second run leaves it as it was.
    assert ImportBatch.objects.get(pk=first["2024-10"]).status == ImportBatch.Status.SUCCEEDED
    assert ledger_totals(SOURCE, "2024-10") == totals(*OCTOBER)
    assert "unchanged" in output


def test_the_newest_upload_of_a_month_wins(bucket: Any) -> None:
    # Versioned folders (as AWS Data Exports writes them) below one month: the newer replaces
    # the older instead of being added to it.
    month = f"{ROOT}/BILLING_PERIOD=2024-09"
    export_month(bucket, f"{month}/20241002T0000Z", [jsonl(month_records("202409", [(5, 0)]))])
    newer = [jsonl(month_records("202409", [(6, -1), (7, 0)]))]
    export_month(bucket, f"{month}/20241102T0000Z", newer)

    output = ingest()

    batch = ImportBatch.objects.get()
    assert batch.row_count == len(uploaded(*newer))
    assert ledger_totals(SOURCE, "2024-09") == totals(*newer)
    assert f"gs://{BUCKET}/{month}/20241102T0000Z/" in output


def test_hive_partitions_below_a_month_are_one_upload(bucket: Any) -> None:
    days = [
        jsonl(month_records("202410", [(6, -1)])),
        jsonl(month_records("202410", [(7, 0), (8, 0)])),
    ]
    for day, data in enumerate(days, start=1):
        upload(bucket, f"{ROOT}/invoice_month=202410/day={day}/part-0.json", data)

    ingest()

    batch = ImportBatch.objects.get()
    assert batch.row_count == len(uploaded(*days))
    assert ledger_totals(SOURCE, "2024-10") == totals(*days)


def test_a_uri_naming_one_shard_does_not_restate_the_month(bucket: Any) -> None:
    names = export_month(bucket, f"{ROOT}/2024-09", SEPTEMBER)
    ingest()
    month = ImportBatch.objects.get()

    ingest(f"gs://{BUCKET}/{names[0]}")

    single = ImportBatch.objects.exclude(pk=month.pk).get()
    assert single.source == f"gcp-bigquery:gs://{BUCKET}/{names[0]}"
    month.refresh_from_db()
    assert month.status == ImportBatch.Status.SUCCEEDED
    assert ledger_totals(SOURCE, "2024-09") == totals(*SEPTEMBER)


def test_a_corrupt_shard_fails_its_month_naming_object_row_and_column(bucket: Any) -> None:
    names = export_month(bucket, f"{ROOT}/2024-09", SEPTEMBER)
    ingest()
    before = ledger()

    bad = month_records("202409", [(1, 0), (2, 0)])
    bad[1]["cost"] = "two dollars"
    upload(bucket, names[1], jsonl(bad))
    with pytest.raises(CommandError) as raised:
        ingest()

    where = f"file gs://{BUCKET}/{names[1]}, row 2, column cost"
    assert where in str(raised.value)
    failed = ImportBatch.objects.get(status=ImportBatch.Status.FAILED)
    assert where in failed.error
    assert ledger() == before


def test_two_folders_of_one_month_are_refused(bucket: Any) -> None:
    export_month(bucket, f"{ROOT}/2024-09", SEPTEMBER[:1])
    export_month(bucket, f"{ROOT}/202409", SEPTEMBER[1:])

    with pytest.raises(CommandError, match="both hold 2024-09"):
        ingest()
    assert not ImportBatch.objects.exists()


def test_a_missing_bucket_is_refused(bucket: Any) -> None:
    with pytest.raises(CommandError) as raised:
        ingest("gs://no-such-bucket/gcp")

    assert "gs://no-such-bucket/gcp: the bucket does not exist" in str(raised.value)
    assert not ImportBatch.objects.exists()


def test_nothing_but_placeholders_and_markers_is_a_clear_error(bucket: Any) -> None:
    upload(bucket, f"{ROOT}/", b"")
    upload(bucket, f"{ROOT}/2024-09/", b"")
    upload(bucket, f"{ROOT}/2024-09/_SUCCESS", b"")

    with pytest.raises(CommandError, match=f"{URI}: no billing files below it"):
        ingest()
    with pytest.raises(CommandError, match="no billing files below it"):
        ingest(f"gs://{BUCKET}/elsewhere")
    assert not ImportBatch.objects.exists()


# GCS's JSON API error for objects.list without storage.objects.list (the emulator has no IAM).
DENIED = (
    "finops-reader@finops-test.iam.gserviceaccount.com does not have storage.objects.list "
    "access to the Google Cloud Storage bucket. Permission 'storage.objects.list' denied on "
    "resource (or it may not exist)."
)
DENIED_BODY = {
    "error": {
        "code": 403,
        "message": DENIED,
        "errors": [{"message": DENIED, "domain": "global", "reason": "forbidden"}],
    }
}


def test_access_refused_stops_the_import_before_anything_changes(
    bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    export_month(bucket, f"{ROOT}/2024-09", SEPTEMBER)
    ingest()
    before = ledger()
    batches = ImportBatch.objects.count()

    host = "http://gcs.recorded.test"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
    with responses.RequestsMock() as mock:
        listing = re.compile(re.escape(f"{host}/storage/v1/b/{BUCKET}/o") + r"\?.*")
        mock.add(responses.GET, listing, json=DENIED_BODY, status=403)
        with pytest.raises(CommandError) as raised:
            ingest()

    assert f"cannot read {URI}: access refused (403 {DENIED})" in str(raised.value)
    assert ledger() == before
    assert ImportBatch.objects.count() == batches


def test_no_credentials_is_a_clear_error(
    db: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-key.json"))

    with pytest.raises(CommandError, match="no Google credentials to read gs://"):
        ingest()
    assert not ImportBatch.objects.exists()


def test_json_lines_shards_whose_first_records_differ_are_one_batch(bucket: Any) -> None:
    # BigQuery leaves NULL fields out of JSON lines, so one shard's first record (a record, not
    # a header) has other keys than the next one's: that is no reason to refuse the month.
    full = month_records("202409", [(2.5, -0.5)])
    sparse = month_records("202409", [(1.25, 0), (4, -1)])
    for record in sparse:
        del record["labels"], record["resource"]
    sparse[0]["credits"] = []
    shards = [jsonl(full), gzip.compress(jsonl(sparse))]
    export_month(bucket, f"{ROOT}/2024-09", shards)

    ingest()

    batch = ImportBatch.objects.get()
    assert (batch.status, batch.row_count) == (ImportBatch.Status.SUCCEEDED, 3)
    assert batch.parts.count() == 2
    assert ledger_totals(SOURCE, "2024-09") == totals(*shards)


def test_a_csv_shard_among_json_lines_fails_the_month(bucket: Any) -> None:
    names = export_month(bucket, f"{ROOT}/2024-09", SEPTEMBER[:2])
    csv_name = upload(bucket, f"{ROOT}/2024-09/billing-extra.csv", b"cost,currency\n1,USD\n")

    with pytest.raises(CommandError, match="parts mix CSV and JSON") as raised:
        ingest()

    assert f"gs://{BUCKET}/{csv_name}" in str(raised.value)
    assert f"gs://{BUCKET}/{names[0]}" in str(raised.value)
    assert ImportBatch.objects.get().status == ImportBatch.Status.FAILED
    assert not CostLineItem.objects.exists()
