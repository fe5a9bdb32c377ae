"""ingest_billing with a bq:// URI: the real google-cloud-bigquery client against recorded
BigQuery REST responses (tables.get, jobs.insert, jobs.getQueryResults), served at the HTTP level
by `responses`. Each invoice month is queried with a query parameter, flattened to the file
parser's dotted names and imported as one batch; a refusal stops the import before anything
changes."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import responses
from django.core.management import call_command
from django.core.management.base import CommandError
from google.auth.credentials import AnonymousCredentials
from google.cloud import bigquery

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.sources import SourceFetchError, gcp_bigquery
from billing_ingest.sources.gcp_bigquery import bigquery_export_parse
from tests.recorded_bigquery import BQ_DATASET as DATASET
from tests.recorded_bigquery import BQ_PROJECT as PROJECT
from tests.recorded_bigquery import BQ_SOURCE as SOURCE
from tests.recorded_bigquery import BQ_TABLE as TABLE
from tests.recorded_bigquery import BQ_URI as URI
from tests.recorded_bigquery import ROWS_SQL, RecordedBigQuery, cost_of, export_row

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------ recorded REST shapes


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordedBigQuery]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        server = RecordedBigQuery(mock)
        # The real client, anonymous: no token request; every API call goes to the recording.
        monkeypatch.setattr(
            gcp_bigquery,
            "bigquery_client",
            lambda *, project: bigquery.Client(project=project, credentials=AnonymousCredentials()),
        )
        yield server


def ingest(uri: str, *args: str) -> str:
    out = io.StringIO()
    call_command(
        "ingest_billing",
        "--format",
        "gcp-bigquery",
        uri,
        "--no-attribute",
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def ledger() -> list[tuple[int, str, str, str]]:
    rows = CostLineItem.objects.order_by("id")
    return [(r.batch_id, r.source, str(r.billing_period), str(r.billed_cost)) for r in rows]


# ------------------------------------------------------------------ tests


def test_a_month_is_queried_with_a_parameter_and_imported_as_one_batch(
    recorded: RecordedBigQuery,
) -> None:
    pages = [
        [
            export_row(month="202409", cost="2.933908", credits=[("sud", "-0.58678")]),
            export_row(month="202409", cost="1.0E-6", credits=[("free-tier", "-1.5E-7")]),
        ],
        [export_row(month="202409", cost="0.1", team="speech", day="03")],
    ]
    recorded.months["202409"] = pages

    ingest(f"{URI}?month=202409")

    batch = ImportBatch.objects.get()
    assert (batch.status, batch.source, batch.billing_periods, batch.row_count) == (
        ImportBatch.Status.SUCCEEDED,
        SOURCE,
        ["2024-09"],
        3,
    )
    billed, effective = cost_of(pages)
    rows = CostLineItem.objects.filter(source=SOURCE, billing_period="2024-09-01")
    assert sum((r.billed_cost for r in rows), Decimal(0)) == billed
    assert sum((r.effective_cost for r in rows), Decimal(0)) == effective
    # The credits came through the query with their name, type and exact amount.
    credits = sorted(
        (c["name"], c["type"], Decimal(c["amount"])) for r in rows for c in r.x_credits
    )
    assert credits == [
        ("free-tier", "SUSTAINED_USAGE_DISCOUNT", Decimal("-1.5E-7")),
        ("sud", "SUSTAINED_USAGE_DISCOUNT", Decimal("-0.58678")),
    ]
    # Nested records reached the parser under their dotted names.
    first = CostLineItem.objects.order_by("id").first()
    assert first is not None
    assert first.sku_id == "039F-D0DA-4055"
    assert first.service_name == "Compute Engine"
    assert first.region_id == "us-central1"
    assert first.sub_account_id == "ml-train"
    assert first.resource_id == "//compute.googleapis.com/projects/ml-train/instances/123"
    assert first.x_instance_type == "a2-highgpu-1g"
    assert first.tags["team"] == "vision"
    assert first.tags["cost-center"] == "r-and-d"
    assert first.charge_period_start == datetime(2024, 9, 2, 10, tzinfo=UTC)
    # The month travelled as a query parameter, not as SQL text.
    rows_job = next(
        j for j in recorded.inserted if j["configuration"]["query"]["query"] == ROWS_SQL
    )
    (parameter,) = rows_job["configuration"]["query"]["queryParameters"]
    assert parameter["name"] == "month"
    assert parameter["parameterValue"] == {"value": "202409"}
    assert "202409" not in ROWS_SQL


def test_a_requeried_month_replaces_the_old_batch(recorded: RecordedBigQuery) -> None:
    recorded.months["202409"] = [[export_row(month="202409", cost="5.00")]]
    ingest(f"{URI}?month=202409")
    old = ImportBatch.objects.get()

    restated = [[export_row(month="202409", cost="7.25"), export_row(month="202409", cost="1.5")]]
    recorded.months["202409"] = restated
    ingest(f"{URI}?month=202409")

    old.refresh_from_db()
    assert old.status == ImportBatch.Status.SUPERSEDED
    rows = CostLineItem.objects.filter(source=SOURCE)
    assert sum((r.billed_cost for r in rows), Decimal(0)) == cost_of(restated)[0]
    assert rows.count() == 2


def test_several_months_are_one_batch_each_with_one_source(recorded: RecordedBigQuery) -> None:
    recorded.months["202409"] = [[export_row(month="202409", cost="1.25")]]
    recorded.months["202410"] = [[export_row(month="202410", cost="2.50")]]

    ingest(f"{URI}?month=202410,202409")

    batches = ImportBatch.objects.order_by("id")
    assert [(b.source, b.billing_periods) for b in batches] == [
        (SOURCE, ["2024-09"]),
        (SOURCE, ["2024-10"]),
    ]


def test_access_denied_on_the_table_is_refused_before_anything_changes(
    recorded: RecordedBigQuery,
) -> None:
    recorded.months["202409"] = [[export_row(month="202409", cost="5.00")]]
    ingest(f"{URI}?month=202409")
    before = ledger()
    message = (
        f"Access Denied: Table {PROJECT}:{DATASET}.{TABLE}: User does not have permission to "
        "query table, or perhaps it does not exist."
    )
    recorded.deny["tables.get"] = message

    with pytest.raises(CommandError) as raised:
        ingest(f"{URI}?month=202409")

    assert f"cannot read {URI}: 403" in str(raised.value)
    assert "Access Denied" in str(raised.value)
    assert ledger() == before
    assert ImportBatch.objects.count() == 1


def test_no_permission_to_run_jobs_is_refused_before_anything_changes(
    recorded: RecordedBigQuery,
) -> None:
    message = (
        f"Access Denied: Project {PROJECT}: User does not have bigquery.jobs.create permission "
        f"in project {PROJECT}."
    )
    recorded.deny["jobs.insert"] = message
    recorded.months["202409"] = [[export_row(month="202409", cost="5.00")]]

    with pytest.raises(CommandError, match=r"bigquery\.jobs\.create"):
        ingest(f"{URI}?month=202409")

    assert not ImportBatch.objects.exists()
    assert not CostLineItem.objects.exists()


def test_a_missing_table_and_an_empty_month_are_clear_errors(recorded: RecordedBigQuery) -> None:
    with pytest.raises(CommandError, match="404 Not found: Table"):
        ingest(f"bq://{PROJECT}.{DATASET}.no_such_table?month=202409")
    recorded.months["202409"] = [[export_row(month="202409", cost="5.00")]]
    with pytest.raises(CommandError, match=r"no rows with invoice\.month 202408"):
        ingest(f"{URI}?month=202408,202409")
    assert not ImportBatch.objects.exists()


def test_only_the_bigquery_format_reads_bq_uris(recorded: RecordedBigQuery) -> None:
    with pytest.raises(CommandError, match="use one of gcp-bigquery"):
        call_command("ingest_billing", "--format", "focus", f"{URI}?month=202409")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        (f"{URI}?month=202409", (PROJECT, DATASET, TABLE, ("202409",), PROJECT)),
        (
            "bq://example.com:billing-prj.exports.gcp_billing_export_v1_X?month=202412,202401"
            "&job_project=finops-jobs",
            (
                "example.com:billing-prj",
                "exports",
                "gcp_billing_export_v1_X",
                ("202401", "202412"),
                "finops-jobs",
            ),
        ),
    ],
)
def test_uri_names_table_months_and_job_project(
    uri: str, expected: tuple[str, str, str, tuple[str, ...], str]
) -> None:
    export = bigquery_export_parse(uri)
    assert (
        export.project,
        export.dataset,
        export.table,
        export.months,
        export.job_project,
    ) == expected


@pytest.mark.parametrize(
    "uri",
    [
        f"{URI}",  # no month
        f"{URI}?month=2024-09",
        f"{URI}?month=202413",
        f"bq://{DATASET}.{TABLE}?month=202409",  # no project
        f"bq://{PROJECT}.{DATASET}.`x`?month=202409",
        f"{URI}?month=202409&where=1",
    ],
)
def test_unusable_uris_are_refused(uri: str) -> None:
    with pytest.raises(SourceFetchError):
        bigquery_export_parse(uri)
