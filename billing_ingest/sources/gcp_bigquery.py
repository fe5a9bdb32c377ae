"""GCP billing export read straight from its BigQuery table (google-cloud-bigquery).

``bq://PROJECT.DATASET.TABLE?month=YYYYMM[,YYYYMM...]`` names the detailed (or standard) export
table and the invoice months to import. Each month is one delivery: its rows are queried with
``WHERE invoice.month = @month`` (a query parameter, never pasted into the SQL), flattened to the
dotted column names the ``gcp-bigquery`` file parser knows, written to one gzip JSON-lines file
and imported as one batch, so a re-queried month replaces the old one at once (DESIGN 4).

Planning (nothing imported yet) reads the table's schema and runs one small query counting the
rows of each month: a refused table, a missing one, a job the credentials may not run, a schema
that is not a billing export, or a month without rows all stop the import before anything
changes. Only the columns the parser reads are selected, because BigQuery bills per column
scanned.

The same query reads each month's newest ``export_time``. The export only appends (a correction
is a new row with a later export_time), so a month's row count and newest export_time are its
version: a month whose version was imported before has nothing new and is not queried again,
which scans two columns instead of all of them. Without ``export_time`` the table's own
last-modified time stands in (it moves with every load, for every month); a view or external
table has no version (always queried), as its data changes without the table changing.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from billing_ingest.sources import SourceAccessError, SourceFetchError
from finops.core.wording import plural

SCHEME = "bq"
# Top-level export columns the gcp-bigquery parser reads; the rest of the table is not scanned.
WANTED_COLUMNS = (
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
    "cost_at_list",
)
REQUIRED_COLUMNS = ("cost", "currency", "usage_start_time", "usage_end_time", "invoice")
# Seconds to wait for one month's query and its result pages.
QUERY_TIMEOUT = 1800.0

# Project ids may be domain-scoped (example.com:my-project), so the table and dataset are taken
# from the right. Backticks and spaces are refused: the name is quoted into the SQL.
_PROJECT_RE = re.compile(r"^[a-z][a-z0-9.:-]{0,127}$")
_DATASET_RE = re.compile(r"^\w{1,1024}$")
_TABLE_RE = re.compile(r"^[\w-]{1,1024}$")
_MONTH_RE = re.compile(r"^(\d{4})(0[1-9]|1[0-2])$")


@dataclass(frozen=True)
class BigQueryExport:
    """A parsed ``bq://`` URI."""

    project: str
    dataset: str
    table: str
    months: tuple[str, ...]  # YYYYMM, as invoice.month spells it
    job_project: str  # the project the query jobs run (and are billed) in

    @property
    def table_id(self) -> str:
        return f"{self.project}.{self.dataset}.{self.table}"

    @property
    def uri(self) -> str:
        """The export without its months: the same for every month, so a source name."""
        return f"{SCHEME}://{self.table_id}"


@dataclass(frozen=True)
class MonthPlan:
    month: str  # YYYYMM
    rows: int
    columns: tuple[str, ...]
    location: str | None
    version: str | None = None  # see the module docstring; None: unknown, always queried

    @property
    def billing_period(self) -> str:
        return f"{self.month[:4]}-{self.month[4:]}"


def bigquery_export_parse(uri: str) -> BigQueryExport:
    """``bq://PROJECT.DATASET.TABLE?month=YYYYMM[,YYYYMM...][&job_project=ID]``."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != SCHEME:
        raise SourceFetchError(f"{uri}: not a bq:// URI")
    name = parts.netloc + parts.path
    project, _, rest = name.rpartition(".")  # rest = table
    project, _, dataset = project.rpartition(".")
    table = rest
    if not (_PROJECT_RE.match(project) and _DATASET_RE.match(dataset) and _TABLE_RE.match(table)):
        raise SourceFetchError(
            f"{uri}: name the export table, bq://PROJECT.DATASET.TABLE?month=YYYYMM"
        )
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"month", "job_project"})
    if unknown:
        raise SourceFetchError(
            f"{uri}: unknown URI {plural('option', len(unknown))} {', '.join(unknown)}"
        )
    months = [m.strip() for value in query.get("month", []) for m in value.split(",")]
    if not months or not all(_MONTH_RE.match(m) for m in months):
        raise SourceFetchError(
            f"{uri}: give the invoice month or months to import, ?month=YYYYMM or "
            "?month=YYYYMM,YYYYMM"
        )
    job_project = (query.get("job_project") or [project])[-1]
    if not _PROJECT_RE.match(job_project):
        raise SourceFetchError(f"{uri}: job_project {job_project!r} is not a project id")
    return BigQueryExport(
        project=project,
        dataset=dataset,
        table=table,
        months=tuple(sorted(set(months))),
        job_project=job_project,
    )


def bigquery_client(*, project: str) -> Any:
    """A client with the environment's Application Default Credentials."""
    import google.auth.exceptions
    from google.cloud import bigquery

    try:
        return bigquery.Client(project=project)
    except google.auth.exceptions.DefaultCredentialsError as exc:
        raise SourceAccessError(
            f"no Google Cloud credentials ({exc}); set GOOGLE_APPLICATION_CREDENTIALS or run "
            "gcloud auth application-default login"
        ) from None


def _access_error(exc: Exception, *, what: str) -> SourceAccessError:
    """'cannot read bq://...: 403 Access Denied: ... (accessDenied)': BigQuery's own message
    and reason, without the request URL the client puts in front of it."""
    errors = getattr(exc, "errors", None) or [{}]
    first = errors[0] if isinstance(errors[0], dict) else {}
    message = first.get("message") or getattr(exc, "message", None) or str(exc)
    reason = f" ({first['reason']})" if first.get("reason") else ""
    code = getattr(exc, "code", None)
    prefix = f"{code} " if code else ""
    return SourceAccessError(f"cannot read {what}: {prefix}{message}{reason}")


def _api_call(export: BigQueryExport, call: Any) -> Any:
    """Run a client call, turning Google API and auth errors into SourceAccessError."""
    import google.auth.exceptions
    from google.api_core import exceptions as api_exceptions

    try:
        return call()
    except (api_exceptions.GoogleAPIError, google.auth.exceptions.GoogleAuthError) as exc:
        raise _access_error(exc, what=export.uri) from None


def _count_sql(export: BigQueryExport, *, export_time: bool) -> str:
    newest = ", MAX(export_time) AS last_export" if export_time else ""
    return (
        f"SELECT invoice.month AS month, COUNT(*) AS row_count{newest} "
        f"FROM `{export.table_id}` WHERE invoice.month IN UNNEST(@months) GROUP BY month"
    )


@dataclass(frozen=True)
class _MonthCount:
    rows: int
    last_export: datetime | None


def _month_version(table: Any, count: _MonthCount) -> str | None:
    if getattr(table, "table_type", "TABLE") != "TABLE":
        return None  # a view's data changes without the view changing
    if count.last_export is not None:
        return f"rows={count.rows} export_time={count.last_export.isoformat()}"
    modified = getattr(table, "modified", None)
    return f"rows={count.rows} modified={modified.isoformat()}" if modified else None


def _rows_sql(export: BigQueryExport, columns: Iterable[str]) -> str:
    selected = ", ".join(f"`{column}`" for column in columns)
    return f"SELECT {selected} FROM `{export.table_id}` WHERE invoice.month = @month"


def bigquery_export_plan(*, client: Any, export: BigQueryExport) -> list[MonthPlan]:
    """One plan per requested month, each known to have rows (nothing downloaded).

    Raises SourceAccessError when BigQuery refuses and SourceFetchError when the table is not a
    billing export or a month has no rows."""
    from google.cloud import bigquery

    table = _api_call(export, lambda: client.get_table(export.table_id))
    present = {field.name for field in table.schema}
    missing = [column for column in REQUIRED_COLUMNS if column not in present]
    if missing:
        raise SourceFetchError(
            f"{export.uri}: not a billing export table (no column {', '.join(missing)})"
        )
    columns = tuple(column for column in WANTED_COLUMNS if column in present)
    config = bigquery.QueryJobConfig(
        query_parameters=[bigquery.ArrayQueryParameter("months", "STRING", list(export.months))]
    )
    sql = _count_sql(export, export_time="export_time" in present)

    def count() -> dict[str, _MonthCount]:
        job = client.query(sql, job_config=config, location=table.location)
        return {
            row["month"]: _MonthCount(int(row["row_count"]), row.get("last_export"))
            for row in job.result(timeout=QUERY_TIMEOUT)
        }

    counts = _api_call(export, count)
    empty = [month for month in export.months if month not in counts or not counts[month].rows]
    if empty:
        raise SourceFetchError(
            f"{export.uri}: no rows with invoice.month {', '.join(empty)} in the table"
        )
    return [
        MonthPlan(m, counts[m].rows, columns, table.location, _month_version(table, counts[m]))
        for m in export.months
    ]


# --------------------------------------------------------------------------- rows to JSON lines


def _json_value(value: Any) -> Any:
    """Client values to JSON: floats keep their shortest repr (json's own), so the parser's
    Decimal reading sees the digits BigQuery sent; NUMERIC stays exact as text."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {key: _json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    return value


def bigquery_row_flatten(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"service": {"description": x}} -> {"service.description": x}. Repeated fields (credits,
    labels, project.labels) stay JSON lists, which the file parser reads as they are."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(bigquery_row_flatten(value, f"{name}."))
        else:
            flat[name] = _json_value(value)
    return flat


def _jsonl_write(rows: Iterator[Any], dest: Path) -> int:
    count = 0
    # mtime 0: the same rows in the same order give the same bytes (a duplicate import).
    with (
        dest.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0) as out,
        io.TextIOWrapper(out, encoding="utf-8", newline="\n") as text,
    ):
        for row in rows:
            record = bigquery_row_flatten(dict(row.items()))
            text.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
            text.write("\n")
            count += 1
    return count


def bigquery_month_fetch(
    *, client: Any, export: BigQueryExport, plan: MonthPlan, dest: Path
) -> Path:
    """Query one invoice month into ``dest``/TABLE-YYYYMM.jsonl.gz and return that file."""
    from google.cloud import bigquery

    config = bigquery.QueryJobConfig(
        query_parameters=[bigquery.ScalarQueryParameter("month", "STRING", plan.month)]
    )
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{export.table}-{plan.month}.jsonl.gz"

    def run() -> int:
        job = client.query(
            _rows_sql(export, plan.columns), job_config=config, location=plan.location
        )
        return _jsonl_write(iter(job.result(timeout=QUERY_TIMEOUT)), path)

    written = _api_call(export, run)
    if written == 0:
        # Counted in planning: rows gone since then mean the month is being rewritten.
        raise SourceFetchError(
            f"{export.uri}: invoice.month {plan.month} returned no rows (being re-exported?)"
        )
    return path
