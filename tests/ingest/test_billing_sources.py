"""Scheduled billing sources: a BillingSource names an export (a URI, or an AWS Data Export
discovered with bcm-data-exports); its fetch task imports each billing period's newest delivery
exactly as `ingest_billing URI` does and records what happened on the source.

S3 is moto in server mode (the fixtures and delivery helpers of test_ingest_uris). moto does not
implement bcm-data-exports, so discovery talks to a local HTTP server that answers the JSON 1.1
calls with the recorded bodies in tests/recorded/bcm_data_exports/: the real boto3 client, end
to end. A fetch downloads only deliveries whose fingerprint changed: shown with S3, and with
GCS (gcp-storage-emulator) and BigQuery (recorded REST) through the fixtures of their own test
files. Tasks run eagerly (conftest).
"""

from __future__ import annotations

import gzip
import io
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
import responses
from botocore.exceptions import ClientError
from celery.exceptions import Retry
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from google.auth.credentials import AnonymousCredentials
from google.cloud import bigquery

from billing_ingest.models import BillingSource, CostLineItem, ImportBatch
from billing_ingest.services.sources import CLAIM_EXPIRES, billing_source_check
from billing_ingest.sources import SourceAccessError, SourceFetchError, gcp_bigquery, gcp_storage
from billing_ingest.sources.aws_data_exports import aws_export_discover, export_format
from billing_ingest.sources.transient import source_error_transient
from billing_ingest.tasks.sources import fetch_billing_source, fetch_billing_sources_all
from finops.attribution.models import AttributionRun
from tests.builders import csv_text, focus_row
from tests.clock import Clock
from tests.cur_s3_deliveries import CUR_EXPORT as EXPORT
from tests.cur_s3_deliveries import S3_BUCKET as BUCKET
from tests.cur_s3_deliveries import S3_SOURCE as SOURCE
from tests.cur_s3_deliveries import S3_URI as URI
from tests.cur_s3_deliveries import costs_sum, cur_part, deliver, ledger, month_total
from tests.gcs_exports import (
    GCS_OCTOBER,
    GCS_ROOT,
    GCS_SEPTEMBER,
    GCS_SOURCE,
    GCS_URI,
    export_month,
    gcs_totals,
    gcs_upload,
    jsonl,
    ledger_totals,
    month_records,
)
from tests.recorded_bigquery import (
    BQ_SOURCE,
    BQ_URI,
    ROWS_SQL,
    RecordedBigQuery,
    cells,
    cost_of,
    export_row,
    field,
    micros,
)

pytestmark = pytest.mark.django_db

# Fixtures of conftest: s3 (a moto bucket holding s3://billing-exports/cur/gpu-cur2; its
# s3_clock stamps LastModified) and bucket (the in-process gcp-storage-emulator).

RECORDED = Path(__file__).parent.parent / "recorded" / "bcm_data_exports"
TARGET_PREFIX = "AWSBillingAndCostManagementDataExports."
CUR_ARN = json.loads((RECORDED / "get_export_cur2.json").read_text())["body"]["Export"]["ExportArn"]
FOCUS_ARN = json.loads((RECORDED / "get_export_focus.json").read_text())["body"]["Export"][
    "ExportArn"
]


class _RecordedHandler(BaseHTTPRequestHandler):
    """Answers bcm-data-exports calls (POST, X-Amz-Target names the operation) with the recorded
    response the test routed to that operation (and, for GetExport, that ARN)."""

    server: _RecordedServer

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        operation = self.headers.get("X-Amz-Target", "").removeprefix(TARGET_PREFIX)
        self.server.calls.append((operation, request, self.headers.get("Authorization", "")))
        key = f"{operation} {request['ExportArn']}" if "ExportArn" in request else operation
        name = self.server.routes.get(key) or self.server.routes.get(operation)
        recorded: dict[str, Any]
        if name is None:
            recorded = {"status": 500, "body": {"__type": "NotRecorded", "Message": key}}
        else:
            recorded = json.loads((RECORDED / name).read_text())
        payload = json.dumps(recorded["body"]).encode()
        self.send_response(recorded["status"])
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-amzn-RequestId", "0d6f3a8e-5b1c-4f7e-9a2d-6c8b0e1f2a3b")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


class _RecordedServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RecordedHandler)
        self.routes: dict[str, str] = {}
        self.calls: list[tuple[str, dict, str]] = []

    def operations(self) -> list[str]:
        return [operation for operation, _, _ in self.calls]


@pytest.fixture
def data_exports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[_RecordedServer]:
    """The recorded bcm-data-exports API; boto3 reaches it through the environment only
    (AWS_ENDPOINT_URL_BCM_DATA_EXPORTS), as the task builds its own client."""
    server = _RecordedServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    assert isinstance(host, str)
    monkeypatch.setenv("AWS_ENDPOINT_URL_BCM_DATA_EXPORTS", f"http://{host}:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # the API answers in us-east-1 only
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield server
    server.shutdown()
    server.server_close()


def uri_source(**fields: Any) -> BillingSource:
    values = {"name": "aws-main", "format": "aws-cur", "uri": URI, **fields}
    return BillingSource.objects.create(**values)


def fetch(source: BillingSource) -> dict:
    result = fetch_billing_source.delay(source.pk).get(timeout=60)
    source.refresh_from_db()
    return result


def batch_statuses() -> list[tuple[str, list[str]]]:
    return [(b.status, b.billing_periods) for b in ImportBatch.objects.order_by("id")]


# --- explicit URI --------------------------------------------------------------------------


def test_a_uri_source_imports_each_month_and_records_success(s3: Any) -> None:
    september = [["1.25", "2.50"], ["3.125"]]
    october = [["4.00"]]
    deliver(s3, "2024-09", "v1", september)
    deliver(s3, "2024-10", "v1", october)
    source = uri_source()

    result = fetch(source)

    assert result["status"] == "succeeded"
    # The same source ingest_billing gives the URI: hand and schedule restate the same rows.
    assert set(ImportBatch.objects.values_list("source", flat=True)) == {SOURCE}
    assert batch_statuses() == [("succeeded", ["2024-09"]), ("succeeded", ["2024-10"])]
    assert month_total("2024-09") == costs_sum(september)
    assert month_total("2024-10") == costs_sum(october)
    assert source.last_status == BillingSource.Status.SUCCEEDED
    assert source.last_message == "imported 2024-09, 2024-10"
    assert source.last_fetched_at is not None
    assert source.fetch_started_at is None  # claim released
    # The months it changed were re-attributed.
    attributed = AttributionRun.objects.values_list("billing_period", flat=True)
    assert sorted(str(month)[:7] for month in attributed) == ["2024-09", "2024-10"]


def test_a_restated_month_replaces_the_month(s3: Any, s3_clock: Clock) -> None:
    deliver(s3, "2024-09", "v1", [["1.00", "2.00"], ["3.00"]])
    deliver(s3, "2024-10", "v1", [["4.00"]])
    source = uri_source()
    fetch(source)
    first = ImportBatch.objects.get(billing_periods=["2024-09"])

    s3_clock.tick()  # a later Last-Modified, without waiting for it
    restated = [["10.00"], ["20.00", "0.50"]]
    deliver(s3, "2024-09", "v2", restated)
    fetch(source)

    first.refresh_from_db()
    assert first.status == ImportBatch.Status.SUPERSEDED
    assert month_total("2024-09") == costs_sum(restated)
    assert month_total("2024-10") == Decimal("4.00")
    assert source.last_message == "imported 2024-09; unchanged 2024-10"


# --- deliveries with nothing new are not downloaded ---------------------------------------


@pytest.fixture
def s3_gets(s3: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The key of every GetObject sent from now on (download_file's too): the task's S3 client
    comes from boto3's default session, whose handlers every client it makes inherits."""
    keys: list[str] = []
    session = boto3.session.Session()
    session.events.register(
        "before-parameter-build.s3.GetObject", lambda params, **_: keys.append(params["Key"])
    )
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", session)
    return keys


def data_gets(keys: list[str]) -> list[str]:
    """The data files among them (planning reads each period's newest manifest, a few KB)."""
    return [key for key in keys if "/data/" in key]


def test_a_second_run_with_nothing_new_downloads_nothing_and_records_nothing(
    s3: Any, s3_gets: list[str]
) -> None:
    keys = deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    source = uri_source()
    fetch(source)
    assert data_gets(s3_gets) == keys
    before = ledger()
    s3_gets.clear()

    result = fetch(source)

    assert data_gets(s3_gets) == []
    assert ledger() == before
    assert batch_statuses() == [("succeeded", ["2024-09"])]  # no DUPLICATE batch either
    assert (result["months"], result["unchanged"], result["batch_ids"]) == ([], ["2024-09"], [])
    assert result["status"] == "succeeded"
    assert source.last_message == "unchanged 2024-09"


def test_the_fetch_command_says_unchanged(s3: Any, s3_gets: list[str]) -> None:
    deliver(s3, "2024-09", "v1", [["3.00"]])
    uri_source()
    call_command("fetch_billing_sources", "--name", "aws-main", stdout=io.StringIO())
    s3_gets.clear()
    out = io.StringIO()

    call_command("fetch_billing_sources", "--name", "aws-main", stdout=out)

    assert out.getvalue() == "aws-main: succeeded: unchanged 2024-09\n"
    assert data_gets(s3_gets) == []

    call_command("fetch_billing_sources", "--name", "aws-main", "--force", stdout=io.StringIO())

    assert len(data_gets(s3_gets)) == 1


def test_a_new_manifest_is_fetched_and_the_other_months_are_not(
    s3: Any, s3_gets: list[str], s3_clock: Clock
) -> None:
    deliver(s3, "2024-09", "v1", [["1.00", "2.00"], ["3.00"]])
    deliver(s3, "2024-10", "v1", [["4.00"]])
    source = uri_source()
    fetch(source)
    first = ImportBatch.objects.get(billing_periods=["2024-09"])

    s3_clock.tick()  # a later Last-Modified, without waiting for it
    restated = [["10.00"], ["20.00", "0.50"]]
    keys = deliver(s3, "2024-09", "v2", restated)
    s3_gets.clear()
    fetch(source)

    assert data_gets(s3_gets) == keys  # September's new parts, nothing of October
    first.refresh_from_db()
    assert first.status == ImportBatch.Status.SUPERSEDED
    assert month_total("2024-09") == costs_sum(restated)
    assert month_total("2024-10") == Decimal("4.00")
    assert source.last_message == "imported 2024-09; unchanged 2024-10"


def test_a_manifest_overwritten_in_place_is_fetched(
    s3: Any, s3_gets: list[str], s3_clock: Clock
) -> None:
    # An export set to overwrite rewrites the same manifest and data keys on every refresh.
    deliver(s3, "2024-09", "current", [["1.00"]])
    source = uri_source()
    fetch(source)

    s3_clock.tick()  # a later Last-Modified, without waiting for it
    restated = [["5.00"], ["6.00"]]
    keys = deliver(s3, "2024-09", "current", restated)
    s3_gets.clear()
    fetch(source)

    assert data_gets(s3_gets) == keys
    assert month_total("2024-09") == costs_sum(restated)
    assert source.last_message == "imported 2024-09"


def test_forced_fetches_download_again_and_find_duplicates(s3: Any, s3_gets: list[str]) -> None:
    keys = deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    source = uri_source()
    fetch(source)
    s3_gets.clear()

    result = fetch_billing_source.delay(source.pk, force=True).get(timeout=60)

    assert data_gets(s3_gets) == keys
    assert batch_statuses() == [("succeeded", ["2024-09"]), ("duplicate", ["2024-09"])]
    assert result["unchanged"] == ["2024-09"]


def test_a_month_imported_before_fingerprints_learns_its_own_from_a_duplicate(
    s3: Any, s3_gets: list[str]
) -> None:
    keys = deliver(s3, "2024-09", "v1", [["1.00"], ["2.00"]])
    source = uri_source()
    fetch(source)
    # As the batches imported before the fingerprint column existed.
    ImportBatch.objects.update(delivery_fingerprint="")
    s3_gets.clear()

    fetch(source)  # downloads once more: the same bytes, a duplicate ...
    assert data_gets(s3_gets) == keys
    s3_gets.clear()
    fetch(source)  # ... which taught the month's batch its fingerprint

    assert data_gets(s3_gets) == []
    assert batch_statuses() == [("succeeded", ["2024-09"]), ("duplicate", ["2024-09"])]
    assert source.last_message == "unchanged 2024-09"


def test_a_restated_month_ingested_by_hand_is_not_skipped(s3: Any, s3_gets: list[str]) -> None:
    # The fingerprint is compared with the month's current batch: rows a hand import put in
    # its place (same source, other bytes) are replaced by the export's again.
    deliver(s3, "2024-09", "v1", [["1.00"]])
    source = uri_source()
    fetch(source)
    other = cur_part("2024-09", ["9.99"])
    s3.put_object(Bucket=BUCKET, Key="hand/upload.csv.gz", Body=other)
    hand = f"s3://{BUCKET}/hand"
    s3.put_object(
        Bucket=BUCKET,
        Key="hand/metadata/BILLING_PERIOD=2024-09/hand-Manifest.json",
        Body=json.dumps({"dataFiles": [f"{hand}/upload.csv.gz"]}).encode(),
    )
    call_command(
        "ingest_billing",
        "--format",
        "aws-cur",
        hand,
        "--source",
        SOURCE,
        "--no-attribute",
        stdout=io.StringIO(),
    )
    assert month_total("2024-09") == Decimal("9.99")
    s3_gets.clear()

    fetch(source)

    assert len(data_gets(s3_gets)) == 1
    assert month_total("2024-09") == Decimal("1.00")


# Google Cloud Storage (gcp-storage-emulator) and BigQuery (recorded REST): the same rule.


def spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    """The plans ``module.name`` (a fetch function, still run) is called with from now on."""
    plans: list[Any] = []
    original = getattr(module, name)

    def recording(**kwargs: Any) -> Any:
        plans.append(kwargs["plan"])
        return original(**kwargs)

    monkeypatch.setattr(module, name, recording)
    return plans


class _RecordedWithExportTimes(RecordedBigQuery):
    """The recorded BigQuery API, also answering each month's newest export_time, which the
    count query asks for when the table has that column."""

    def __init__(self, mock: Any) -> None:
        super().__init__(mock)
        self.export_times: dict[str, str] = {}

    def _pages(self, job: dict) -> tuple[list[dict], list[list[dict]]]:
        schema, pages = super()._pages(job)
        if "MAX(export_time)" not in job["configuration"]["query"]["query"]:
            return schema, pages
        rows = [
            cells(*(cell["v"] for cell in row["f"]), micros(self.export_times[month]))
            for row in pages[0]
            for month in [row["f"][0]["v"]]
        ]
        return [*schema, field("last_export", "TIMESTAMP")], [rows]

    def row_queries(self) -> list[str]:
        """The month of every rows query (the expensive one) run so far."""
        return [
            job["configuration"]["query"]["queryParameters"][0]["parameterValue"]["value"]
            for job in self.inserted
            if job["configuration"]["query"]["query"] == ROWS_SQL
        ]


@pytest.fixture
def bigquery_recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[_RecordedWithExportTimes]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        server = _RecordedWithExportTimes(mock)
        monkeypatch.setattr(
            gcp_bigquery,
            "bigquery_client",
            lambda *, project: bigquery.Client(project=project, credentials=AnonymousCredentials()),
        )
        yield server


def test_gcs_months_with_the_same_generations_are_not_downloaded(
    bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched = spy(monkeypatch, gcp_storage, "gcs_delivery_fetch")
    export_month(bucket, f"{GCS_ROOT}/2024-09", GCS_SEPTEMBER)
    october = export_month(bucket, f"{GCS_ROOT}/2024-10", GCS_OCTOBER)
    source = uri_source(name="gcs", format="gcp-bigquery", uri=GCS_URI)
    fetch(source)
    assert len(fetched) == 2

    fetch(source)
    assert len(fetched) == 2
    assert source.last_message == "unchanged 2024-09, 2024-10"

    # Re-exported over the same name: a new generation of that one object.
    restated = [jsonl(month_records("202410", [(50, -5)]))]
    gcs_upload(bucket, october[0], restated[0])
    fetch(source)

    assert [plan.billing_period for plan in fetched[2:]] == ["2024-10"]
    assert source.last_message == "imported 2024-10; unchanged 2024-09"
    assert ledger_totals(GCS_SOURCE, "2024-10") == gcs_totals(*restated)


def test_bigquery_months_with_no_new_export_are_not_queried_again(
    bigquery_recorded: _RecordedWithExportTimes,
) -> None:
    september = [[export_row(month="202409", cost="5.00")]]
    bigquery_recorded.months["202409"] = september
    bigquery_recorded.export_times["202409"] = "2024-10-03T04:00:00"
    source = uri_source(name="bq", format="gcp-bigquery", uri=f"{BQ_URI}?month=202409")
    fetch(source)
    assert bigquery_recorded.row_queries() == ["202409"]

    fetch(source)
    assert bigquery_recorded.row_queries() == ["202409"]  # only the count query ran again
    assert source.last_message == "unchanged 2024-09"

    # A late correction is appended with a later export_time.
    september[0].append(export_row(month="202409", cost="-0.25", day="30"))
    bigquery_recorded.export_times["202409"] = "2024-10-05T04:00:00"
    fetch(source)

    assert bigquery_recorded.row_queries() == ["202409", "202409"]
    assert source.last_message == "imported 2024-09"
    rows = CostLineItem.objects.filter(source=BQ_SOURCE)
    assert sum((r.billed_cost for r in rows), Decimal(0)) == cost_of(september)[0]


# --- discovery through bcm-data-exports (recorded HTTP) -----------------------------------


def test_discovery_by_name_finds_bucket_prefix_export_and_format(
    s3: Any, data_exports: _RecordedServer
) -> None:
    data_exports.routes.update(
        {"ListExports": "list_exports.json", f"GetExport {CUR_ARN}": "get_export_cur2.json"}
    )
    september = [["5.00"], ["7.25"]]
    deliver(s3, "2024-09", "v1", september)
    source = BillingSource.objects.create(name="aws-payer", aws_export_name=EXPORT)

    result = fetch(source)

    assert result["status"] == "succeeded"
    assert data_exports.operations() == ["ListExports", "GetExport"]
    assert data_exports.calls[1][1] == {"ExportArn": CUR_ARN}
    # Signed by the real SDK for the service (SigV4, credentials from the environment).
    authorization = data_exports.calls[1][2]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "/bcm-data-exports/aws4_request" in authorization
    # s3://{S3Bucket}/{S3Prefix}/{Name}, and COST_AND_USAGE_REPORT is CUR 2.0.
    assert (source.uri, source.format) == (f"s3://{BUCKET}/cur/{EXPORT}", "aws-cur")
    assert source.uri == URI
    assert set(ImportBatch.objects.values_list("source", flat=True)) == {SOURCE}
    assert month_total("2024-09") == costs_sum(september)


def test_a_focus_export_is_read_as_focus(s3: Any, data_exports: _RecordedServer) -> None:
    data_exports.routes[f"GetExport {FOCUS_ARN}"] = "get_export_focus.json"
    rows = [focus_row(EffectiveCost="12.5"), focus_row(EffectiveCost="0.125", SkuId="SKU2")]
    root = "focus/gpu-focus"
    data_key = f"{root}/data/BILLING_PERIOD=2024-09/gpu-focus-00001.csv.gz"
    s3.put_object(Bucket=BUCKET, Key=data_key, Body=gzip.compress(csv_text(rows).encode()))
    manifest = {"exportName": "gpu-focus", "dataFiles": [f"s3://{BUCKET}/{data_key}"]}
    s3.put_object(
        Bucket=BUCKET,
        Key=f"{root}/metadata/BILLING_PERIOD=2024-09/gpu-focus-Manifest.json",
        Body=json.dumps(manifest).encode(),
    )
    source = BillingSource.objects.create(name="aws-focus", aws_export_arn=FOCUS_ARN)

    fetch(source)

    assert data_exports.operations() == ["GetExport"]
    assert (source.uri, source.format) == (f"s3://{BUCKET}/focus/gpu-focus", "focus")
    items = CostLineItem.objects.filter(source=f"focus:s3://{BUCKET}/focus/gpu-focus")
    assert sorted(item.effective_cost for item in items) == [Decimal("0.125"), Decimal("12.5")]
    assert source.last_status == BillingSource.Status.SUCCEEDED
    # The recorded export is UNHEALTHY: said, but what is in the bucket is still imported.
    assert "AWS reports the export UNHEALTHY (INSUFFICIENT_PERMISSION)" in source.last_message


def test_discovery_needs_no_region_configured(
    data_exports: _RecordedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The API lives in us-east-1 only, so a worker with no AWS region set still reaches it.
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.delenv("AWS_REGION", raising=False)
    data_exports.routes[f"GetExport {CUR_ARN}"] = "get_export_cur2.json"

    found = aws_export_discover(export_arn=CUR_ARN)

    assert (found.name, found.uri, found.format, found.table) == (
        EXPORT,
        URI,
        "aws-cur",
        "COST_AND_USAGE_REPORT",
    )
    assert found.health == "HEALTHY"


def test_discovery_access_denied_is_a_clear_error_and_changes_nothing(
    s3: Any, data_exports: _RecordedServer
) -> None:
    data_exports.routes["ListExports"] = "access_denied.json"
    deliver(s3, "2024-09", "v1", [["1.00"]])
    source = BillingSource.objects.create(name="aws-payer", aws_export_name=EXPORT)

    result = fetch(source)

    assert result["status"] == "failed"
    assert not result["transient"]
    assert data_exports.operations() == ["ListExports"]  # refused once, never retried
    assert "bcm-data-exports refused" in source.last_message
    assert "AccessDeniedException" in source.last_message
    assert "not authorized to perform: bcm-data-exports:ListExports" in source.last_message
    assert (source.uri, source.format) == ("", "")
    assert not ImportBatch.objects.exists()


def test_an_unknown_export_name_lists_the_exports_there_are(data_exports: _RecordedServer) -> None:
    data_exports.routes["ListExports"] = "list_exports.json"

    with pytest.raises(SourceFetchError, match=r"no AWS data export named 'gpu'.*gpu-cur2"):
        aws_export_discover(export_name="gpu")


def test_the_table_an_export_reads_decides_the_format() -> None:
    assert export_format("COST_AND_USAGE_REPORT", name="x") == "aws-cur"
    assert export_format("FOCUS_1_0_AWS", name="x") == "focus"
    assert export_format("FOCUS_1_2_AWS", name="x") == "focus"
    with pytest.raises(SourceFetchError, match="COST_OPTIMIZATION_RECOMMENDATIONS, which is not"):
        export_format("COST_OPTIMIZATION_RECOMMENDATIONS", name="x")


# --- failures --------------------------------------------------------------------------------


def test_access_denied_on_s3_records_the_error_and_keeps_earlier_data(
    s3: Any, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, s3_clock: Clock
) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    source = uri_source()
    fetch(source)
    before = ledger()
    batches = ImportBatch.objects.count()
    s3_clock.tick()  # a later Last-Modified, without waiting for it
    deliver(s3, "2024-09", "v2", [["9.00"]])
    # A real IAM user with no S3 permissions; from now on moto checks every request.
    iam = boto3.client("iam", endpoint_url=s3_endpoint)
    iam.create_user(UserName="finops-worker")
    key = iam.create_access_key(UserName="finops-worker")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # it caches the first credentials
    requests.post(f"{s3_endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    try:
        result = fetch(source)
    finally:
        requests.post(f"{s3_endpoint}/moto-api/reset-auth", data=b"inf", timeout=10)

    assert result["status"] == "failed"
    assert not result["transient"]
    assert source.last_status == BillingSource.Status.FAILED
    assert "AccessDenied" in source.last_message
    assert f"cannot read s3://{BUCKET}/cur/{EXPORT}/metadata/" in source.last_message
    assert source.fetch_started_at is None
    assert ledger() == before
    assert ImportBatch.objects.count() == batches


def test_an_unreachable_store_is_retried_then_recorded(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    source = uri_source()
    fetch(source)
    before = ledger()
    # Nothing listens there: connection refused, which may pass (botocore's own retries off).
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")

    with pytest.raises(Retry):
        fetch_billing_source.apply(args=(source.pk,), throw=True)

    source.refresh_from_db()
    assert source.last_status == BillingSource.Status.FAILED
    assert "Could not connect" in source.last_message
    assert source.fetch_started_at is None  # released, so the retry can claim it
    assert ledger() == before


def wrapped(original: Exception) -> SourceAccessError:
    """``original`` turned into a SourceAccessError the way the source modules do it."""
    try:
        try:
            raise original
        except Exception:
            raise SourceAccessError("cannot read s3://b/x") from None
    except SourceAccessError as exc:
        return exc


def aws_error(code: str, status: int) -> ClientError:
    response = {
        "Error": {"Code": code, "Message": ""},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "ListObjectsV2")


def test_only_errors_a_later_attempt_may_pass_are_transient() -> None:
    assert source_error_transient(wrapped(aws_error("ThrottlingException", 400)))
    assert source_error_transient(wrapped(aws_error("SlowDown", 503)))
    assert source_error_transient(wrapped(ConnectionResetError("reset by peer")))
    assert not source_error_transient(wrapped(aws_error("AccessDenied", 403)))
    assert not source_error_transient(wrapped(aws_error("NoSuchBucket", 404)))
    assert not source_error_transient(SourceFetchError("manifest: no dataFiles list"))


# --- claim and dispatch ----------------------------------------------------------------------


def test_a_source_claimed_by_a_running_fetch_is_skipped(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    claimed_at = timezone.now() - timedelta(minutes=5)
    source = uri_source(fetch_started_at=claimed_at)

    result = fetch(source)

    assert result["status"] == "skipped"
    assert not ImportBatch.objects.exists()
    assert source.fetch_started_at == claimed_at  # still the other run's
    assert source.last_fetched_at is None


def test_a_claim_older_than_any_fetch_can_run_is_taken_over(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    source = uri_source(fetch_started_at=timezone.now() - CLAIM_EXPIRES - timedelta(minutes=1))

    result = fetch(source)

    assert result["status"] == "succeeded"
    assert source.fetch_started_at is None
    assert month_total("2024-09") == Decimal("1.00")


def test_the_dispatcher_fetches_enabled_sources_and_skips_disabled_ones(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["1.00"]])
    enabled = uri_source()
    disabled = uri_source(name="aws-old", uri=f"s3://{BUCKET}/cur/old-export", enabled=False)

    queued = fetch_billing_sources_all.delay().get(timeout=60)

    assert queued == [enabled.pk]
    enabled.refresh_from_db()
    disabled.refresh_from_db()
    assert enabled.last_status == BillingSource.Status.SUCCEEDED
    assert (disabled.last_status, disabled.last_fetched_at) == ("", None)
    # A fetch queued before the source was disabled does nothing either.
    assert fetch(disabled)["status"] == "skipped"


def test_beat_runs_the_dispatcher_every_6_hours_and_expires_before_the_next_run() -> None:
    from finops.celery import app

    [entry] = [
        e for e in app.conf.beat_schedule.values() if e["task"] == fetch_billing_sources_all.name
    ]
    schedule = entry["schedule"]
    assert schedule.hour == {0, 6, 12, 18}
    assert len(schedule.minute) == 1
    assert 0 < entry["options"]["expires"] < 6 * 3600
    assert fetch_billing_sources_all.name in app.tasks


def test_fetch_now_in_the_admin_queues_a_fetch(s3: Any, client: Client) -> None:
    deliver(s3, "2024-09", "v1", [["2.00"]])
    source = uri_source()
    client.force_login(User.objects.create_superuser("admin", password="admin-password-123"))

    response = client.post(
        reverse("admin:billing_ingest_billingsource_changelist"),
        {"action": "fetch_now", "_selected_action": [source.pk]},
        follow=True,
    )

    assert "1 billing source fetch queued" in response.content.decode()
    source.refresh_from_db()
    assert source.last_status == BillingSource.Status.SUCCEEDED
    assert month_total("2024-09") == Decimal("2.00")


def test_fetch_billing_sources_command_fetches_one_source_by_name(s3: Any) -> None:
    deliver(s3, "2024-09", "v1", [["3.00"]])
    uri_source()
    out = io.StringIO()

    call_command("fetch_billing_sources", "--name", "aws-main", stdout=out)

    assert "aws-main: succeeded: imported 2024-09" in out.getvalue()
    assert month_total("2024-09") == Decimal("3.00")


# --- checking a source before it is saved -----------------------------------------------------


def check(**fields: Any) -> None:
    values = {"format": "", "uri": "", "aws_export_arn": "", "aws_export_name": "", **fields}
    billing_source_check(source_id=None, **values)


def test_a_source_needs_a_location_and_a_known_format(db: None) -> None:
    with pytest.raises(ValidationError) as raised:
        check(format="aws-cur")
    assert "uri" in raised.value.message_dict

    with pytest.raises(ValidationError) as raised:
        check(format="csv", uri=URI)
    assert "unknown billing format 'csv'" in raised.value.message_dict["format"][0]

    source = uri_source()
    with pytest.raises(ValidationError, match="already fetches"):
        check(format="aws-cur", uri=URI)
    # The source itself, edited, does not clash with itself.
    billing_source_check(
        format="aws-cur", uri=URI, aws_export_arn="", aws_export_name="", source_id=source.pk
    )

    # An AWS export named: location and format come from discovery.
    check(aws_export_name="gpu-cur2")


def test_the_admin_form_refuses_a_source_it_could_not_fetch(db: None, client: Client) -> None:
    client.force_login(User.objects.create_superuser("admin", password="admin-password-123"))
    add_url = reverse("admin:billing_ingest_billingsource_add")

    response = client.post(add_url, {"name": "odd", "format": "csv", "uri": URI, "enabled": "on"})

    assert response.status_code == 200  # the form again, with the error under its field
    assert "unknown billing format" in response.content.decode()
    assert not BillingSource.objects.exists()

    response = client.post(add_url, {"name": "ok", "format": "aws-cur", "uri": URI})
    assert response.status_code == 302
    assert BillingSource.objects.get().name == "ok"
