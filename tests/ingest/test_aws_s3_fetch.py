"""Downloading AWS Data Exports from S3 (moto in server mode): the newest manifest of each
billing period decides which data files are fetched, and the files parse as aws-cur."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from billing_ingest.parsers.aws_cur import parse_aws_cur
from billing_ingest.sources.aws_s3 import ExportFetchError, aws_export_download
from tests.clock import Clock

moto_server = pytest.importorskip("moto.server")

BUCKET = "billing-exports"
PREFIX = "cur"
EXPORT = "gpu-cur2"
ROOT = f"{PREFIX}/{EXPORT}"

HEADER = (
    "bill_billing_period_start_date,line_item_line_item_type,line_item_usage_start_date,"
    "line_item_usage_end_date,line_item_unblended_cost,line_item_currency_code\n"
)


def cur_bytes(period: str, cost: str) -> bytes:
    row = f"{period}-01T00:00:00Z,Usage,{period}-02T00:00:00Z,{period}-02T01:00:00Z,{cost},USD\n"
    return gzip.compress((HEADER + row).encode())


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint: str) -> Iterator[Any]:
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=BUCKET)
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for entry in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=entry["Key"])
    client.delete_bucket(Bucket=BUCKET)


def put_manifest(s3: Any, key: str, data_keys: list[str]) -> None:
    body = {"exportName": EXPORT, "dataFiles": [f"s3://{BUCKET}/{k}" for k in data_keys]}
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(body).encode())


def test_newest_manifest_per_period_wins(s3: Any, tmp_path: Path, s3_clock: Clock) -> None:
    old = f"{ROOT}/data/BILLING_PERIOD=2024-09/v1/{EXPORT}-00001.csv.gz"
    new = [f"{ROOT}/data/BILLING_PERIOD=2024-09/v2/{EXPORT}-0000{i}.csv.gz" for i in (1, 2)]
    october = f"{ROOT}/data/BILLING_PERIOD=2024-10/v1/{EXPORT}-00001.csv.gz"
    s3.put_object(Bucket=BUCKET, Key=old, Body=cur_bytes("2024-09", "1.00"))
    s3.put_object(Bucket=BUCKET, Key=new[0], Body=cur_bytes("2024-09", "2.00"))
    s3.put_object(Bucket=BUCKET, Key=new[1], Body=cur_bytes("2024-09", "3.00"))
    s3.put_object(Bucket=BUCKET, Key=october, Body=cur_bytes("2024-10", "4.00"))
    put_manifest(s3, f"{ROOT}/metadata/BILLING_PERIOD=2024-09/v1/{EXPORT}-Manifest.json", [old])
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    put_manifest(s3, f"{ROOT}/metadata/BILLING_PERIOD=2024-09/v2/{EXPORT}-Manifest.json", new)
    put_manifest(s3, f"{ROOT}/metadata/BILLING_PERIOD=2024-10/v1/{EXPORT}-Manifest.json", [october])
    # Not a manifest of this export: ignored.
    s3.put_object(
        Bucket=BUCKET, Key=f"{ROOT}/metadata/BILLING_PERIOD=2024-10/other.json", Body=b"{}"
    )

    fetched = aws_export_download(
        bucket=BUCKET, prefix=PREFIX, export_name=EXPORT, dest=tmp_path, client=s3
    )

    assert [p.billing_period for p in fetched] == ["2024-09", "2024-10"]
    assert fetched[0].manifest_key.endswith(f"v2/{EXPORT}-Manifest.json")
    september = [
        item for f in fetched[0].files for c in parse_aws_cur(f, file_label=f.name) for item in c
    ]
    assert sorted(str(i["billed_cost"].normalize()) for i in september) == ["2", "3"]
    # Each period in a folder of its own, each part a numbered file keeping its suffixes.
    assert fetched[0].files == [tmp_path / "2024-09" / f"0000{i}.csv.gz" for i in (0, 1)]
    assert fetched[1].files == [tmp_path / "2024-10" / "00000.csv.gz"]


def test_period_filter(s3: Any, tmp_path: Path) -> None:
    key = f"{ROOT}/data/BILLING_PERIOD=2024-10/{EXPORT}-00001.csv.gz"
    s3.put_object(Bucket=BUCKET, Key=key, Body=cur_bytes("2024-10", "4.00"))
    put_manifest(s3, f"{ROOT}/metadata/BILLING_PERIOD=2024-10/{EXPORT}-Manifest.json", [key])
    put_manifest(s3, f"{ROOT}/metadata/BILLING_PERIOD=2024-09/{EXPORT}-Manifest.json", [])

    fetched = aws_export_download(
        bucket=BUCKET,
        prefix=PREFIX,
        export_name=EXPORT,
        dest=tmp_path,
        client=s3,
        periods={"2024-10"},
    )
    assert [p.billing_period for p in fetched] == ["2024-10"]
    (path,) = fetched[0].files
    (chunk,) = parse_aws_cur(path, file_label=path.name)
    assert chunk[0]["billing_period_start"] == datetime(2024, 10, 1, tzinfo=UTC)


def test_manifest_pointing_outside_the_bucket_is_refused(s3: Any, tmp_path: Path) -> None:
    body = {"dataFiles": ["s3://someone-else/cur/x.csv.gz"]}
    s3.put_object(
        Bucket=BUCKET,
        Key=f"{ROOT}/metadata/BILLING_PERIOD=2024-10/{EXPORT}-Manifest.json",
        Body=json.dumps(body).encode(),
    )
    with pytest.raises(ExportFetchError, match="outside bucket"):
        aws_export_download(
            bucket=BUCKET, prefix=PREFIX, export_name=EXPORT, dest=tmp_path, client=s3
        )


def test_a_hostile_key_in_a_manifest_cannot_write_outside_the_download_folder(
    s3: Any, tmp_path: Path
) -> None:
    # S3 keys may start with "/": joined to the download folder, this one would be the absolute
    # path of a file outside it.
    outside = tmp_path / "outside" / "evil.csv.gz"
    hostile = str(outside)
    assert hostile.startswith("/")
    s3.put_object(Bucket=BUCKET, Key=hostile, Body=cur_bytes("2024-10", "6.00"))
    put_manifest(s3, f"{ROOT}/metadata/BILLING_PERIOD=2024-10/{EXPORT}-Manifest.json", [hostile])
    dest = tmp_path / "dest"

    (period,) = aws_export_download(
        bucket=BUCKET, prefix=PREFIX, export_name=EXPORT, dest=dest, client=s3
    )

    assert not outside.exists()
    (path,) = period.files
    assert path == dest / "2024-10" / "00000.csv.gz"
    (chunk,) = parse_aws_cur(path, file_label=hostile)
    assert [str(item["billed_cost"].normalize()) for item in chunk] == ["6"]


def test_a_manifest_key_climbing_out_of_the_export_is_refused(s3: Any, tmp_path: Path) -> None:
    key = f"{ROOT}/data/../../../etc/evil.csv.gz"
    put_manifest(s3, f"{ROOT}/metadata/BILLING_PERIOD=2024-10/{EXPORT}-Manifest.json", [key])

    with pytest.raises(ExportFetchError, match="unusable data file key"):
        aws_export_download(
            bucket=BUCKET, prefix=PREFIX, export_name=EXPORT, dest=tmp_path, client=s3
        )
