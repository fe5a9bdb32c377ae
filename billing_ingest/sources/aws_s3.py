"""Download AWS Data Exports (CUR 2.0) files from S3, one billing period at a time.

An export lands at ``s3://bucket/<prefix>/<export>/data/BILLING_PERIOD=YYYY-MM/...`` and AWS
writes ``<prefix>/<export>/metadata/BILLING_PERIOD=YYYY-MM/[...]/<export>-Manifest.json`` last,
so a manifest means its data files are complete. Months are restated for weeks: the newest
manifest of a period (by LastModified) names the files that are the month now. Each listed data
file is streamed to disk (boto3 download_file), never held in memory.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import boto3

_PERIOD_RE = re.compile(r"BILLING_PERIOD=(\d{4}-\d{2})/")


class ExportFetchError(Exception):
    """The export's layout or manifest is not what AWS Data Exports writes."""


@dataclass
class ExportPeriod:
    billing_period: str  # "YYYY-MM"
    manifest_key: str
    files: list[Path] = field(default_factory=list)


def _export_root(prefix: str, export_name: str) -> str:
    parts = [part for part in (prefix.strip("/"), export_name.strip("/")) if part]
    return "/".join(parts) + "/"


def _newest_manifests(client: Any, *, bucket: str, root: str, export_name: str) -> dict[str, str]:
    """{period: key of its newest manifest} under <root>metadata/."""
    suffix = f"/{export_name}-Manifest.json"
    newest: dict[str, tuple[Any, str]] = {}
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
            if seen is None or (entry["LastModified"], key) > seen:
                newest[period] = (entry["LastModified"], key)
    return {period: key for period, (_, key) in newest.items()}


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
    (the caller removes it). Files keep their path below the export root, so parts with the
    same name in different periods or versions never overwrite each other.
    """
    client = client or boto3.client("s3")
    target = dest or Path(tempfile.mkdtemp(prefix="aws-export-"))
    root = _export_root(prefix, export_name)
    manifests = _newest_manifests(client, bucket=bucket, root=root, export_name=export_name)
    fetched = []
    for period in sorted(manifests):
        if periods is not None and period not in periods:
            continue
        manifest_key = manifests[period]
        body = client.get_object(Bucket=bucket, Key=manifest_key)["Body"].read()
        try:
            manifest = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ExportFetchError(f"{manifest_key}: not JSON ({exc})") from None
        result = ExportPeriod(billing_period=period, manifest_key=manifest_key)
        for key in _data_keys(manifest, bucket=bucket, manifest_key=manifest_key):
            relative = key[len(root) :] if key.startswith(root) else key
            local = target.joinpath(*PurePosixPath(relative).parts)
            local.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, key, str(local))
            result.files.append(local)
        fetched.append(result)
    return fetched
