"""Download AWS Data Exports (CUR 2.0) files from S3, one billing period at a time.

An export lands at ``s3://bucket/<prefix>/<export>/data/BILLING_PERIOD=YYYY-MM/...`` and AWS
writes ``<prefix>/<export>/metadata/BILLING_PERIOD=YYYY-MM/[...]/<export>-Manifest.json`` last,
so a manifest means its data files are complete. Months are restated for weeks: the newest
manifest of a period (by LastModified) names the files that are the month now. Each listed data
file is streamed to disk (boto3 download_file), never held in memory, to a numbered file in the
destination folder (sources/local.py): keys are whatever the manifest says, ``/etc/...`` too.
The newest manifest's ETag and LastModified (from the listing) are its version: a month whose
manifest key and version are the ones imported before has nothing new, and need not be
downloaded again.

Planning (list + read manifests) and fetching (download one period's parts) are separate, so a
caller can refuse everything when the store cannot be read, and fail one period alone when its
manifest names a part that is missing.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from billing_ingest.sources import MissingPartError, SourceAccessError, SourceFetchError
from billing_ingest.sources.local import local_part_path

_PERIOD_RE = re.compile(r"BILLING_PERIOD=(\d{4}-\d{2})/")
_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}


class ExportFetchError(SourceFetchError):
    """The export's layout or manifest is not what AWS Data Exports writes."""


@dataclass
class ExportPeriodPlan:
    """One billing period's newest manifest and the data keys it lists (nothing downloaded)."""

    billing_period: str  # "YYYY-MM"
    manifest_key: str
    data_keys: list[str]
    # The manifest's ETag and LastModified when listed: they change with every write of the
    # manifest, including one that overwrites it in place.
    manifest_version: str = ""


@dataclass
class ExportPeriod:
    billing_period: str  # "YYYY-MM"
    manifest_key: str
    files: list[Path] = field(default_factory=list)


def _export_root(prefix: str, export_name: str) -> str:
    parts = [part for part in (prefix.strip("/"), export_name.strip("/")) if part]
    return "/".join(parts) + "/"


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _access_error(exc: Exception, *, what: str) -> SourceAccessError:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        reason = f"{error.get('Code', '?')}: {error.get('Message', '')}".rstrip(": ")
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return SourceAccessError(f"cannot read {what} ({reason})")


@dataclass(frozen=True)
class _Manifest:
    key: str
    version: str


def _version(entry: dict[str, Any]) -> str:
    # Both: an overwriting export rewrites the manifest in place on every refresh, and its
    # body (so its ETag, an MD5) may come out the same while the data files it lists changed.
    return f"{entry.get('ETag') or ''} {entry['LastModified'].isoformat()}"


def _newest_manifests(
    client: Any, *, bucket: str, root: str, export_name: str
) -> dict[str, _Manifest]:
    """{period: its newest manifest} under <root>metadata/."""
    suffix = f"/{export_name}-Manifest.json"
    newest: dict[str, tuple[Any, str, str]] = {}
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{root}metadata/"):
        for entry in page.get("Contents", []):
            key: str = entry["Key"]
            match = _PERIOD_RE.search(key)
            if not key.endswith(suffix) or match is None:
                continue
            period = match.group(1)
            seen = newest.get(period)
            # Ties (same second) go to the later key: versioned exports name folders by time.
            if seen is None or (entry["LastModified"], key) > seen[:2]:
                newest[period] = (entry["LastModified"], key, _version(entry))
    return {period: _Manifest(key, version) for period, (_, key, version) in newest.items()}


def _data_keys(manifest: dict[str, Any], *, bucket: str, manifest_key: str) -> list[str]:
    listed = manifest.get("dataFiles")
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
        raise ExportFetchError(f"{manifest_key}: no dataFiles list")
    keys = []
    for item in listed:
        key = item
        if item.startswith("s3://"):
            item_bucket, _, key = item[len("s3://") :].partition("/")
            if item_bucket != bucket:
                raise ExportFetchError(
                    f"{manifest_key}: data file {item} is outside bucket {bucket}"
                )
        if not key or ".." in PurePosixPath(key).parts:
            raise ExportFetchError(f"{manifest_key}: unusable data file key {item!r}")
        keys.append(key)
    return keys


def aws_export_plan(
    *,
    client: Any,
    bucket: str,
    prefix: str,
    export_name: str,
    periods: set[str] | None = None,
) -> list[ExportPeriodPlan]:
    """The newest manifest of each billing period and its data keys, sorted by period.

    Raises SourceAccessError when S3 refuses (credentials, missing bucket, no permission) and
    ExportFetchError when a manifest is not what AWS writes: in both cases nothing is fetched.
    """
    root = _export_root(prefix, export_name)
    where = f"s3://{bucket}/{root}metadata/"
    try:
        manifests = _newest_manifests(client, bucket=bucket, root=root, export_name=export_name)
    except (ClientError, BotoCoreError) as exc:
        raise _access_error(exc, what=where) from None
    plans = []
    for period in sorted(manifests):
        if periods is not None and period not in periods:
            continue
        manifest_key = manifests[period].key
        try:
            body = client.get_object(Bucket=bucket, Key=manifest_key)["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            raise _access_error(exc, what=f"s3://{bucket}/{manifest_key}") from None
        try:
            manifest = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ExportFetchError(f"{manifest_key}: not JSON ({exc})") from None
        if not isinstance(manifest, dict):
            raise ExportFetchError(f"{manifest_key}: not a JSON object")
        keys = _data_keys(manifest, bucket=bucket, manifest_key=manifest_key)
        plans.append(ExportPeriodPlan(period, manifest_key, keys, manifests[period].version))
    return plans


def aws_export_fetch(*, client: Any, bucket: str, plan: ExportPeriodPlan, dest: Path) -> list[Path]:
    """Download one period's data files into ``dest`` (numbered, see sources/local.py), in
    manifest order; ``dest`` is one period's own folder.

    A listed key that is not in the bucket raises MissingPartError naming it (AWS writes the
    manifest last, so this is an export that was tampered with or is being deleted, not one
    still being written).
    """
    files = []
    for number, key in enumerate(plan.data_keys):
        local = local_part_path(dest, number, key)
        try:
            client.download_file(bucket, key, str(local))
        except ClientError as exc:
            if _error_code(exc) in _NOT_FOUND:
                raise MissingPartError(
                    f"manifest s3://{bucket}/{plan.manifest_key} lists data file "
                    f"s3://{bucket}/{key}, which is not in the bucket"
                ) from None
            raise _access_error(exc, what=f"s3://{bucket}/{key}") from None
        except BotoCoreError as exc:
            raise _access_error(exc, what=f"s3://{bucket}/{key}") from None
        files.append(local)
    return files


def aws_export_download(
    *,
    bucket: str,
    prefix: str,
    export_name: str,
    dest: Path | None = None,
    periods: set[str] | None = None,
    client: Any = None,
) -> list[ExportPeriod]:
    """Download the data files of each billing period's newest manifest, sorted by period.

    ``periods`` ("YYYY-MM") limits the download; ``dest`` defaults to a new temporary folder
    (the caller removes it), which gets one sub-folder per period.
    """
    client = client or boto3.client("s3")
    target = dest or Path(tempfile.mkdtemp(prefix="aws-export-"))
    plans = aws_export_plan(
        client=client, bucket=bucket, prefix=prefix, export_name=export_name, periods=periods
    )
    return [
        ExportPeriod(
            billing_period=plan.billing_period,
            manifest_key=plan.manifest_key,
            files=aws_export_fetch(
                client=client,
                bucket=bucket,
                plan=plan,
                dest=target / plan.billing_period,  # "YYYY-MM" from _PERIOD_RE: a safe name
            ),
        )
        for plan in plans
    ]
