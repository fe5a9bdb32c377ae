"""BigQuery REST responses recorded in shape (the billing export table's schema, query jobs and
their result pages), served to the real google-cloud-bigquery client by `responses`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

BQ_PROJECT = "finops-billing"


BQ_DATASET = "billing_export"


BQ_TABLE = "gcp_billing_export_resource_v1_0123AB_4567CD_89EF01"


BQ_TABLE_ID = f"{BQ_PROJECT}.{BQ_DATASET}.{BQ_TABLE}"


BQ_URI = f"bq://{BQ_TABLE_ID}"


BQ_SOURCE = f"gcp-bigquery:{BQ_URI}"


BQ_API = "https://bigquery.googleapis.com/bigquery/v2"


BQ_LOCATION = "US"


def field(
    name: str,
    type_: str = "STRING",
    mode: str = "NULLABLE",
    fields: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
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
    + f" FROM `{BQ_TABLE_ID}` WHERE invoice.month = @month"
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
    credits: Sequence[tuple[str, str]] = (),
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
        table = re.compile(
            rf"{re.escape(BQ_API)}/projects/{BQ_PROJECT}/datasets/{BQ_DATASET}/tables/\w+"
        )
        mock.add_callback("GET", table, callback=self.tables_get)
        mock.add_callback("POST", f"{BQ_API}/projects/{BQ_PROJECT}/jobs", callback=self.jobs_insert)
        results = re.compile(rf"{re.escape(BQ_API)}/projects/{BQ_PROJECT}/queries/[\w-]+")
        mock.add_callback("GET", results, callback=self.get_query_results)

    def tables_get(self, request: Any) -> tuple[int, dict, str]:
        if "tables.get" in self.deny:
            return 403, {}, error_body(403, "accessDenied", self.deny["tables.get"])
        name = urlsplit(request.url).path.rsplit("/", 1)[1]
        if name != BQ_TABLE:
            message = f"Not found: Table {BQ_PROJECT}:{BQ_DATASET}.{name}"
            return 404, {}, error_body(404, "notFound", message)
        resource = {
            "kind": "bigquery#table",
            "id": f"{BQ_PROJECT}:{BQ_DATASET}.{BQ_TABLE}",
            "tableReference": {
                "projectId": BQ_PROJECT,
                "datasetId": BQ_DATASET,
                "tableId": BQ_TABLE,
            },
            "schema": {"fields": TABLE_SCHEMA},
            "timePartitioning": {"type": "DAY"},
            "location": BQ_LOCATION,
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
            "projectId": BQ_PROJECT,
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


def cost_of(pages: list[list[dict]]) -> tuple[Decimal, Decimal]:
    """(billed, effective) computed from the recorded cells: both cost + credits, which is what
    Google invoices (credits are negative)."""
    net = Decimal(0)
    for page in pages:
        for row in page:
            values = row["f"]
            cost = Decimal(values[SELECTED.index("cost")]["v"])
            credits = values[SELECTED.index("credits")]["v"]
            net += cost + sum(Decimal(c["v"]["f"][1]["v"]) for c in credits)
    return net, net
