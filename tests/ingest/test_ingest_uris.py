"""ingest_billing with an s3:// URI, end to end against moto in server mode: an AWS Data Export
(CUR 2.0, gzip CSV parts, manifest written last) imported month by month, restated months,
multi-part months, a manifest naming a missing part, and S3 refusing access."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from typing import Any

import pytest
import requests
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.sources.uris import uri_scheme
from tests.clock import Clock
from tests.cur_s3_deliveries import CUR_EXPORT as EXPORT
from tests.cur_s3_deliveries import CUR_HEADER as HEADER
from tests.cur_s3_deliveries import S3_BUCKET as BUCKET
from tests.cur_s3_deliveries import S3_ROOT as ROOT
from tests.cur_s3_deliveries import S3_SOURCE as SOURCE
from tests.cur_s3_deliveries import S3_URI as URI
from tests.cur_s3_deliveries import (
    costs_sum,
    cur_parquet_part,
    cur_part,
    deliver,
    ledger,
    month_total,
)
from tests.cur_s3_deliveries import ingest_s3 as ingest

pytestmark = pytest.mark.django_db


def test_uri_schemes_are_told_apart_from_paths() -> None:
    assert uri_scheme("s3://b/p") == "s3"
    assert uri_scheme("AZ://c/p") == "az"
    assert uri_scheme("/data/exports") is None
    assert uri_scheme("C:/exports") is None


def test_each_billing_period_is_one_batch_with_a_stable_source(s3: Any) -> None:
    september = [["1.25", "2.50"], ["3.125"], ["0.0001"]]
    october = [["4.00"]]
    deliver(s3, "2024-09", "20241002T0000Z", september)
    deliver(s3, "2024-10", "20241102T0000Z", october)

    ingest()

    batches = ImportBatch.objects.order_by("id")
    assert [(b.source, b.status, b.billing_periods) for b in batches] == [
        (SOURCE, ImportBatch.Status.SUCCEEDED, ["2024-09"]),
        (SOURCE, ImportBatch.Status.SUCCEEDED, ["2024-10"]),
    ]
    # Three parts, one batch: every row of every part is there, none replaced another.
    assert batches[0].row_count == sum(len(part) for part in september)
    assert month_total("2024-09") == costs_sum(september)
    assert month_total("2024-10") == costs_sum(october)


def test_a_restated_month_replaces_every_part_of_the_old_delivery(s3: Any, s3_clock: Clock) -> None:
    old_september = [["1.00", "2.00"], ["3.00"]]
    october = [["4.00"]]
    deliver(s3, "2024-09", "v1", old_september)
    deliver(s3, "2024-10", "v1", october)
    ingest()
    first = {b.billing_periods[0]: b.pk for b in ImportBatch.objects.all()}

    s3_clock.tick()  # a later Last-Modified, without waiting for it
    new_september = [["10.00"], ["20.00", "0.50"], ["30.00"]]
    deliver(s3, "2024-09", "v2", new_september)
    output = ingest()

    old = ImportBatch.objects.get(pk=first["2024-09"])
    assert old.status == ImportBatch.Status.SUPERSEDED
    new = ImportBatch.objects.get(
        superseded_by__isnull=True, billing_periods=["2024-09"], status=ImportBatch.Status.SUCCEEDED
    )
    assert old.superseded_by_id == new.pk
    assert new.row_count == sum(len(part) for part in new_september)
    assert month_total("2024-09") == costs_sum(new_september)
    # October was delivered once: its bytes are the same, so the second run does nothing.
    assert month_total("2024-10") == costs_sum(october)
    assert ImportBatch.objects.get(pk=first["2024-10"]).status == ImportBatch.Status.SUCCEEDED
    assert "unchanged" in output


def test_the_same_delivery_imported_again_is_a_no_op(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    ingest()
    before = ledger()

    ingest()

    assert ledger() == before
    statuses = sorted(ImportBatch.objects.values_list("status", flat=True))
    assert statuses == [ImportBatch.Status.DUPLICATE, ImportBatch.Status.SUCCEEDED]


def test_source_option_names_every_month(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    deliver(s3, "2024-10", "v1", [["4.00"]])

    ingest(URI, "--source", "aws-main")

    assert set(CostLineItem.objects.values_list("source", flat=True)) == {"aws-main"}
    assert CostLineItem.objects.count() == 3


def test_a_manifest_naming_a_missing_part_fails_that_month_and_keeps_its_old_data(
    s3: Any, s3_clock: Clock
) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    ingest()
    before = ledger()

    s3_clock.tick()  # a later Last-Modified, without waiting for it
    keys = deliver(s3, "2024-09", "v2", [["10.00"], ["20.00"]], skip=1)
    with pytest.raises(CommandError) as raised:
        ingest()

    assert f"s3://{BUCKET}/{keys[1]}" in str(raised.value)
    assert "not in the bucket" in str(raised.value)
    failed = ImportBatch.objects.get(status=ImportBatch.Status.FAILED)
    assert f"s3://{BUCKET}/{keys[1]}" in failed.error
    assert failed.source == SOURCE
    assert ledger() == before
    assert month_total("2024-09") == Decimal("3.00")


def test_a_missing_part_leaves_other_months_importing(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]], skip=0)
    deliver(s3, "2024-10", "v1", [["4.00"]])

    with pytest.raises(CommandError, match="1 of 2 file"):
        ingest()

    assert month_total("2024-10") == Decimal("4.00")
    assert not CostLineItem.objects.filter(billing_period="2024-09-01").exists()


def test_a_missing_bucket_is_refused_before_anything_changes(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    ingest()
    before = ledger()
    batches = ImportBatch.objects.count()

    with pytest.raises(CommandError, match="NoSuchBucket") as raised:
        ingest(f"s3://no-such-bucket/{ROOT}")

    assert "s3://no-such-bucket/" in str(raised.value)
    assert ledger() == before
    assert ImportBatch.objects.count() == batches


def test_refused_credentials_stop_the_import_before_anything_changes(
    s3: Any, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, s3_clock: Clock
) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    ingest()
    before = ledger()
    batches = ImportBatch.objects.count()
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    deliver(s3, "2024-09", "v2", [["9.00"]])

    # From now on moto checks credentials: the test keys belong to no IAM user.
    requests.post(f"{s3_endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    try:
        with pytest.raises(CommandError, match="InvalidAccessKeyId") as raised:
            ingest()
    finally:
        requests.post(f"{s3_endpoint}/moto-api/reset-auth", data=b"inf", timeout=10)

    assert f"s3://{BUCKET}/{ROOT}/metadata/" in str(raised.value)
    assert ledger() == before
    assert ImportBatch.objects.count() == batches


def test_no_manifest_under_the_uri_is_a_clear_error(s3: Any) -> None:
    with pytest.raises(CommandError, match=f"no {EXPORT}-Manifest.json under"):
        ingest()
    assert not ImportBatch.objects.exists()


def test_formats_an_aws_export_cannot_hold_are_refused(s3: Any) -> None:
    with pytest.raises(CommandError, match="--format azure cannot be read"):
        call_command("ingest_billing", "--format", "azure", URI, "--no-attribute")


def test_parquet_parts_of_a_month_import_as_one_batch(s3: Any) -> None:
    parts = [["1.5", "2.5"], ["3.25"]]
    keys = [
        f"{ROOT}/data/BILLING_PERIOD=2024-09/v1/{EXPORT}-0000{i}.snappy.parquet" for i in (1, 2)
    ]
    for key, costs in zip(keys, parts, strict=True):
        s3.put_object(Bucket=BUCKET, Key=key, Body=cur_parquet_part("2024-09", costs))
    manifest = {"dataFiles": [f"s3://{BUCKET}/{key}" for key in keys]}
    s3.put_object(
        Bucket=BUCKET,
        Key=f"{ROOT}/metadata/BILLING_PERIOD=2024-09/v1/{EXPORT}-Manifest.json",
        Body=json.dumps(manifest).encode(),
    )

    ingest()

    batch = ImportBatch.objects.get()
    assert (batch.status, batch.row_count) == (ImportBatch.Status.SUCCEEDED, 3)
    assert month_total("2024-09") == costs_sum(parts)


def test_parts_with_different_headers_fail_the_month(s3: Any) -> None:
    keys = deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    other = HEADER.replace("line_item_currency_code", "line_item_currency")
    s3.put_object(
        Bucket=BUCKET, Key=keys[1], Body=gzip.compress((other + "x,Usage,a,b,1,USD\n").encode())
    )

    with pytest.raises(CommandError, match="header differs from the first part"):
        ingest()

    assert f"s3://{BUCKET}/{keys[1]}" in ImportBatch.objects.get().error
    assert not CostLineItem.objects.exists()


def test_a_corrupt_part_fails_the_month_naming_the_part(s3: Any, s3_clock: Clock) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    ingest()
    before = ledger()
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    keys = deliver(s3, "2024-09", "v2", [["1.00"], ["2.00"]])
    whole = cur_part("2024-09", ["2.00"])
    s3.put_object(Bucket=BUCKET, Key=keys[1], Body=whole[: len(whole) // 2])  # truncated

    with pytest.raises(CommandError, match="gzip data is corrupt") as raised:
        ingest()

    assert f"s3://{BUCKET}/{keys[1]}" in str(raised.value)
    assert ledger() == before
