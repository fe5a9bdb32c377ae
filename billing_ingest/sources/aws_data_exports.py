"""Find where an AWS Data Export is written and what it holds, with the bcm-data-exports API.

GetExport returns the export's S3 destination (S3Bucket, S3Prefix) and its data query. AWS
writes the export below ``s3://<S3Bucket>/<S3Prefix>/<export name>/`` (``data/`` and
``metadata/BILLING_PERIOD=YYYY-MM/`` folders, see aws_s3.py), which is the s3:// URI that
ingest_billing takes. The table the query reads decides the parser: COST_AND_USAGE_REPORT is
CUR 2.0 (aws-cur), the FOCUS_1_x_AWS tables are FOCUS (focus); the other tables (cost
optimisation recommendations, carbon emissions, the cost and usage dashboard) are not bills.

An export named without its ARN is looked up with ListExports (names are unique per account).
The API has a single endpoint (us-east-1); botocore maps every commercial region to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from billing_ingest.sources import SourceAccessError, SourceFetchError

SERVICE = "bcm-data-exports"
TABLE_FORMATS = {"COST_AND_USAGE_REPORT": "aws-cur"}
# FOCUS_1_0_AWS, FOCUS_1_2_AWS, ... and the preview table FOCUS_1_0_AWS_PREVIEW.
_FOCUS_TABLE = re.compile(r"FOCUS_\d+_\d+_AWS(?:_PREVIEW)?")
# Table names are case-sensitive, SQL keywords are not (Data Exports' query syntax).
_FROM = re.compile(r"\bFROM\s+([A-Za-z0-9_]+)", re.IGNORECASE)
# No such export, or an ARN that is not one: the setup is wrong, not the access.
_NOT_AN_EXPORT = {"ResourceNotFoundException", "ValidationException"}


@dataclass(frozen=True)
class AwsExport:
    """What discovery found: where the export is written and which parser reads it."""

    arn: str
    name: str
    uri: str  # s3://bucket/prefix/export-name
    format: str  # "aws-cur" or "focus"
    table: str
    health: str  # "HEALTHY", or "UNHEALTHY (REASON)" when AWS reports it is not delivering


def data_exports_client() -> Any:
    """A client from the worker's environment (boto3's default credential chain). A worker
    configured for no region still gets one: the API lives in us-east-1 only."""
    import boto3

    session = boto3.session.Session()
    return session.client(SERVICE, region_name=session.region_name or "us-east-1")


def _api_error(exc: Exception, *, what: str) -> SourceFetchError:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "?"))
        reason = f"{code}: {error.get('Message', '')}".rstrip(": ")
        if code in _NOT_AN_EXPORT:
            return SourceFetchError(f"{what}: {reason}")
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return SourceAccessError(f"{SERVICE} refused or could not be reached for {what} ({reason})")


def _export_arn_by_name(client: Any, name: str) -> str:
    found: list[str] = []
    try:
        for page in client.get_paginator("list_exports").paginate():
            for export in page.get("Exports", []):
                if export.get("ExportName") == name:
                    return str(export["ExportArn"])
                found.append(str(export.get("ExportName")))
    except (ClientError, BotoCoreError) as exc:
        raise _api_error(exc, what="ListExports") from exc
    names = ", ".join(sorted(found)) or "none"
    raise SourceFetchError(f"no AWS data export named {name!r} in this account (exports: {names})")


def _table(query: dict[str, Any], *, name: str) -> str:
    """The table the export's query reads: its FROM clause, else its only table configuration."""
    match = _FROM.search(str(query.get("QueryStatement") or ""))
    if match:
        return match.group(1)
    tables = list(query.get("TableConfigurations") or {})
    if len(tables) == 1:
        return str(tables[0])
    raise SourceFetchError(f"AWS data export {name}: cannot tell which table its query reads")


def export_format(table: str, *, name: str) -> str:
    """The ingest_billing format of an export of ``table``; SourceFetchError for other tables."""
    if table in TABLE_FORMATS:
        return TABLE_FORMATS[table]
    if _FOCUS_TABLE.fullmatch(table):
        return "focus"
    raise SourceFetchError(
        f"AWS data export {name} reads {table}, which is not a bill; export "
        "COST_AND_USAGE_REPORT (CUR 2.0) or a FOCUS_1_x_AWS table"
    )


def _health(status: dict[str, Any]) -> str:
    code = str(status.get("StatusCode") or "UNKNOWN")
    reason = status.get("StatusReason")
    return f"{code} ({reason})" if reason and code != "HEALTHY" else code


def _described(response: dict[str, Any], *, arn: str) -> AwsExport:
    export = response.get("Export") or {}
    name = str(export.get("Name") or "")
    destination = (export.get("DestinationConfigurations") or {}).get("S3Destination") or {}
    bucket = str(destination.get("S3Bucket") or "")
    if not name or not bucket:
        raise SourceFetchError(f"AWS data export {arn}: no name or S3 destination in GetExport")
    prefix = str(destination.get("S3Prefix") or "").strip("/")
    table = _table(export.get("DataQuery") or {}, name=name)
    return AwsExport(
        arn=str(export.get("ExportArn") or arn),
        name=name,
        uri="s3://" + "/".join(part for part in (bucket, prefix, name) if part),
        format=export_format(table, name=name),
        table=table,
        health=_health(response.get("ExportStatus") or {}),
    )


def aws_export_discover(
    *, export_arn: str = "", export_name: str = "", client: Any = None
) -> AwsExport:
    """The S3 URI and format of an AWS data export, by ARN or else by name.

    Raises SourceAccessError when the API refuses or cannot be reached, SourceFetchError when
    the export does not exist, is not the one named, or does not export a bill."""
    if not export_arn and not export_name:
        raise SourceFetchError("name an AWS data export (ARN or name) to discover")
    client = client or data_exports_client()
    arn = export_arn or _export_arn_by_name(client, export_name)
    try:
        response = client.get_export(ExportArn=arn)
    except (ClientError, BotoCoreError) as exc:
        raise _api_error(exc, what=f"GetExport {arn}") from exc
    found = _described(response, arn=arn)
    if export_name and found.name != export_name:
        raise SourceFetchError(
            f"AWS data export {arn} is named {found.name!r}, not {export_name!r}"
        )
    return found
