"""ingest_billing with a bq:// URI: the real google-cloud-bigquery client against recorded
BigQuery REST responses (tables.get, jobs.insert, jobs.getQueryResults), served at the HTTP level
by `responses`. Each invoice month is queried with a query parameter, flattened to the file
parser's dotted names and imported as one batch; a refusal stops the import before anything
changes."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch
from billing_ingest.sources import SourceFetchError, gcp_bigquery
from billing_ingest.sources.gcp_bigquery import bigquery_export_parse

bigquery = pytest.importorskip("google.cloud.bigquery")
responses = pytest.importorskip("responses")
from google.auth.credentials import AnonymousCredentials  # noqa: E402

pytestmark = pytest.mark.django_db

PROJECT = "finops-billing"
DATASET = "billing_export"
TABLE = "gcp_billing_export_resource_v1_0123AB_4567CD_89EF01"
TABLE_ID = f"{PROJECT}.{DATASET}.{TABLE}"
URI = f"bq://{TABLE_ID}"
SOURCE = f"gcp-bigquery:{URI}"
API = "https://bigquery.googleapis.com/bigquery/v2"
LOCATION = "US"

# ------------------------------------------------------------------ recorded REST shapes


def field(name: str, type_: str = "STRING", mode: str = "NULLABLE", fields=None) -> dict:
    out: dict[str, Any] = {"name": name, "type": type_, "mode": mode}
    if fields is not None:
        out["fields"] = fields
    return out


KEY_VALUE = [field("key"), field("value")]
# The detailed (resource-level) export's schema, as tables.get returns it (abridged: columns the
# importer does not select, like export_time and price, show that it selects only what it needs).
TABLE_SCHEMA = [
    field("billing_account_id"),
    field("service", "RECORD", fields=[field("id"), field("description")]),
    field("sku", "RECORD", fields=[field("id"), field("description")]),
    field("usage_start_time", "TIMESTAMP"),
    field("usage_end_time", "TIMESTAMP"),
    field(
        "project",
        "RECORD",
        fields=[
            field("id"),
            field("number"),
            field("name"),
            field("labels", "RECORD", "REPEATED", KEY_VALUE),
            field("ancestry_numbers"),
        ],
    ),
    field("labels", "RECORD", "REPEATED", KEY_VALUE),
    field("system_labels", "RECORD", "REPEATED", KEY_VALUE),
    field(
        "location",
        "RECORD",
        fields=[field("location"), field("country"), field("region"), field("zone")],
    ),
    field("resource", "RECORD", fields=[field("name"), field("global_name")]),
    field("export_time", "TIMESTAMP"),
    field("cost", "FLOAT"),
    field("currency"),
    field("currency_conversion_rate", "FLOAT"),
    field(
        "usage",
        "RECORD",
        fields=[
            field("amount", "FLOAT"),
            field("unit"),
            field("amount_in_pricing_units", "FLOAT"),
            field("pricing_unit"),
        ],
    ),
    field(
        "credits",
        "RECORD",
        "REPEATED",
        [field("name"), field("amount", "FLOAT"), field("full_name"), field("id"), field("type")],
    ),
    field("invoice", "RECORD", fields=[field("month"), field("publisher_type")]),
    field("cost_type"),
    field("price", "RECORD", fields=[field("effective_price", "NUMERIC"), field("unit")]),
]
SELECTED = [
    "billing_account_id",
    "service",
    "sku",
    "usage_start_time",
    "usage_end_time",
    "project",
    "labels",
    "system_labels",
    "location",
    "resource",
    "cost",
    "currency",
    "usage",
    "credits",
    "invoice",
    "cost_type",
]
RESULT_SCHEMA = [f for name in SELECTED for f in TABLE_SCHEMA if f["name"] == name]
ROWS_SQL = (
    "SELECT "
    + ", ".join(f"`{name}`" for name in SELECTED)
    + f" FROM `{TABLE_ID}` WHERE invoice.month = @month"
)


def micros(text: str) -> str:
    """A TIMESTAMP cell as getQueryResults sends it with formatOptions.useInt64Timestamp."""
    stamp = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return str(int(stamp.timestamp()) * 1_000_000)


def cells(*values: Any) -> dict:
    return {"f": [{"v": value} for value in values]}


def key_values(pairs: dict[str, str]) -> list[dict]:
    return [{"v": cells(key, value)} for key, value in pairs.items()]


def export_row(
    *,
    month: str,
    cost: str,
    credits: list[tuple[str, str]] = (),
    sku: tuple[str, str] = ("039F-D0DA-4055", "Nvidia Tesla A100 GPU running in Americas"),
    cost_type: str = "regular",
    team: str = "vision",
    day: str = "02",
) -> dict:
    """One result row in REST form ({"f": [{"v": ...}]}), in SELECTED's column order."""
    start = f"{month[:4]}-{month[4:]}-{day}T10:00:00"
    end = f"{month[:4]}-{month[4:]}-{day}T11:00:00"
    return cells(
        "0123AB-4567CD-89EF01",
        cells("6F81-5844-456A", "Compute Engine"),
        cells(*sku),
        micros(start),
        micros(end),
        cells("ml-train", "123456789012", "ml-train", key_values({"cost-center": "r-and-d"}), None),
        key_values({"team": team}),
        key_values({"compute.googleapis.com/machine_spec": "a2-highgpu-1g"}),
        cells("us-central1", "US", "us-central1", "us-central1-a"),
        cells("trainer-0", "//compute.googleapis.com/projects/ml-train/instances/123"),
        cost,
        "USD",
        cells("3600.0", "seconds", "1.0", "hour"),
        [
            {"v": cells(name, amount, name, f"id-{name}", "SUSTAINED_USAGE_DISCOUNT")}
            for name, amount in credits
        ],
        cells(month, None),
        cost_type,
    )


def error_body(code: int, reason: str, message: str) -> str:
    return json.dumps(
        {
            "error": {
                "code": code,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}],
                "status": "PERMISSION_DENIED" if code == 403 else "NOT_FOUND",
            }
        }
    )


class RecordedBigQuery:
    """Serves recorded BigQuery REST responses to the real client.

    tables.get returns TABLE_SCHEMA; jobs.insert echoes the job as DONE; jobs.getQueryResults
    answers the count query with ``counts`` and the rows query of a month with its pages (a
    pageToken between pages, as BigQuery pages large results). ``deny`` maps an endpoint name
    ("tables.get", "jobs.insert") to a recorded 403."""

    def __init__(self, mock: Any) -> None:
        self.months: dict[str, list[list[dict]]] = {}
        self.deny: dict[str, str] = {}
        self.jobs: dict[str, dict] = {}
        self.inserted: list[dict] = []
        table = re.compile(rf"{re.escape(API)}/projects/{PROJECT}/datasets/{DATASET}/tables/\w+")
        mock.add_callback("GET", table, callback=self.tables_get)
        mock.add_callback("POST", f"{API}/projects/{PROJECT}/jobs", callback=self.jobs_insert)
        results = re.compile(rf"{re.escape(API)}/projects/{PROJECT}/queries/[\w-]+")
        mock.add_callback("GET", results, callback=self.get_query_results)

    def tables_get(self, request: Any) -> tuple[int, dict, str]:
        if "tables.get" in self.deny:
            return 403, {}, error_body(403, "accessDenied", self.deny["tables.get"])
        name = urlsplit(request.url).path.rsplit("/", 1)[1]
        if name != TABLE:
            message = f"Not found: Table {PROJECT}:{DATASET}.{name}"
            return 404, {}, error_body(404, "notFound", message)
        resource = {
            "kind": "bigquery#table",
            "id": f"{PROJECT}:{DATASET}.{TABLE}",
            "tableReference": {"projectId": PROJECT, "datasetId": DATASET, "tableId": TABLE},
            "schema": {"fields": TABLE_SCHEMA},
            "timePartitioning": {"type": "DAY"},
            "location": LOCATION,
            "type": "TABLE",
        }
        return 200, {}, json.dumps(resource)

    def jobs_insert(self, request: Any) -> tuple[int, dict, str]:
        if "jobs.insert" in self.deny:
            return 403, {}, error_body(403, "accessDenied", self.deny["jobs.insert"])
        job = json.loads(request.body)
        self.inserted.append(job)
        job_id = job["jobReference"]["jobId"]
        self.jobs[job_id] = job
        job["status"] = {"state": "DONE"}
        job["statistics"] = {"query": {"totalBytesProcessed": "1024"}}
        job["configuration"]["query"]["destinationTable"] = {
            "projectId": PROJECT,
            "datasetId": "_anon",
            "tableId": f"anon{job_id[:8]}",
        }
        return 200, {}, json.dumps(job)

    def _pages(self, job: dict) -> tuple[list[dict], list[list[dict]]]:
        query = job["configuration"]["query"]
        parameters = {p["name"]: p["parameterValue"] for p in query.get("queryParameters", [])}
        if query["query"] == ROWS_SQL:
            month = parameters["month"]["value"]
            return RESULT_SCHEMA, self.months.get(month, [[]])
        if "COUNT(*)" in query["query"]:
            asked = [v["value"] for v in parameters["months"]["arrayValues"]]
            counts = [
                cells(m, str(sum(len(p) for p in self.months[m])))
                for m in asked
                if m in self.months
            ]
            return [field("month"), field("row_count", "INTEGER")], [counts]
        raise AssertionError(f"unrecorded query {query['query']!r}")

    def get_query_results(self, request: Any) -> tuple[int, dict, str]:
        job_id = urlsplit(request.url).path.rsplit("/", 1)[1]
        params = parse_qs(urlsplit(request.url).query)
        job = self.jobs[job_id]
        schema, pages = self._pages(job)
        body: dict[str, Any] = {
            "kind": "bigquery#getQueryResultsResponse",
            "jobReference": job["jobReference"],
            "totalRows": str(sum(len(page) for page in pages)),
            "jobComplete": True,
            "schema": {"fields": schema},
        }
        if params.get("maxResults") == ["0"]:  # the client waiting for the job: no rows
            return 200, {}, json.dumps(body)
        index = int(params.get("pageToken", ["page-0"])[0].removeprefix("page-"))
        if pages[index]:
            body["rows"] = pages[index]
        if index + 1 < len(pages):
            body["pageToken"] = f"page-{index + 1}"
        return 200, {}, json.dumps(body)


@pytest.fixture
def recorded(monkeypatch) -> Iterator[RecordedBigQuery]:
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


def cost_of(pages: list[list[dict]]) -> tuple[Decimal, Decimal]:
    """(billed, effective) computed from the recorded cells: cost, and cost + credits."""
    billed = effective = Decimal(0)
    for page in pages:
        for row in page:
            values = row["f"]
            cost = Decimal(values[SELECTED.index("cost")]["v"])
            credits = values[SELECTED.index("credits")]["v"]
            billed += cost
            effective += cost + sum(Decimal(c["v"]["f"][1]["v"]) for c in credits)
    return billed, effective


# ------------------------------------------------------------------ tests


def test_a_month_is_queried_with_a_parameter_and_imported_as_one_batch(recorded):
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
    # Nested records reached the parser under their dotted names.
    first = CostLineItem.objects.order_by("id").first()
    assert first.sku_id == "039F-D0DA-4055"
    assert first.service_name == "Compute Engine"
    assert first.region_id == "us-central1"
    assert first.sub_account_id == "ml-train"
    assert first.resource_id == "//compute.googleapis.com/projects/ml-train/instances/123"
    assert first.x_instance_type == "a2-highgpu-1g"
    assert first.tags["team"] == "vision" and first.tags["cost-center"] == "r-and-d"
    assert first.charge_period_start == datetime(2024, 9, 2, 10, tzinfo=UTC)
    # The month travelled as a query parameter, not as SQL text.
    rows_job = next(
        j for j in recorded.inserted if j["configuration"]["query"]["query"] == ROWS_SQL
    )
    (parameter,) = rows_job["configuration"]["query"]["queryParameters"]
    assert parameter["name"] == "month" and parameter["parameterValue"] == {"value": "202409"}
    assert "202409" not in ROWS_SQL


def test_a_requeried_month_replaces_the_old_batch(recorded):
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


def test_several_months_are_one_batch_each_with_one_source(recorded):
    recorded.months["202409"] = [[export_row(month="202409", cost="1.25")]]
    recorded.months["202410"] = [[export_row(month="202410", cost="2.50")]]

    ingest(f"{URI}?month=202410,202409")

    batches = ImportBatch.objects.order_by("id")
    assert [(b.source, b.billing_periods) for b in batches] == [
        (SOURCE, ["2024-09"]),
        (SOURCE, ["2024-10"]),
    ]


def test_access_denied_on_the_table_is_refused_before_anything_changes(recorded):
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


def test_no_permission_to_run_jobs_is_refused_before_anything_changes(recorded):
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


def test_a_missing_table_and_an_empty_month_are_clear_errors(recorded):
    with pytest.raises(CommandError, match="404 Not found: Table"):
        ingest(f"bq://{PROJECT}.{DATASET}.no_such_table?month=202409")
    recorded.months["202409"] = [[export_row(month="202409", cost="5.00")]]
    with pytest.raises(CommandError, match=r"no rows with invoice\.month 202408"):
        ingest(f"{URI}?month=202408,202409")
    assert not ImportBatch.objects.exists()


def test_only_the_bigquery_format_reads_bq_uris(recorded):
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
def test_uri_names_table_months_and_job_project(uri, expected):
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
def test_unusable_uris_are_refused(uri):
    with pytest.raises(SourceFetchError):
        bigquery_export_parse(uri)
