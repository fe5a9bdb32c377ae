"""Billing export URIs (s3://, az://, gs://, bq://) turned into deliveries to import.

A *delivery* is what a cloud writes as one unit: the newest manifest of one AWS billing period,
the newest run of one Azure export date range, one invoice month of a BigQuery billing export
table, or the newest upload of one billing-period folder in GCS (an object outside such folders
is a delivery of its own; see gcp_storage.py). Each delivery is downloaded as its local part
files (checked to share one header or schema, see parts.py) and imported as ONE import batch,
one task per part, with a source that stays the same from one restatement to the next:
``FORMAT:URI`` of the export (or --source). A newer delivery of the same month therefore
replaces all of the older one's rows at once, and parts of one delivery never replace each
other.

Planning lists the store and reads manifests without downloading data: any refusal there
(credentials, missing bucket or container) stops the whole import before anything changes.
Planning also gives each delivery a *fingerprint*, from what the listing already says about it:
the newest manifest's key, ETag and LastModified (s3), the run's blob names and ETags (az), the
objects' names and generations (gs), a month's row count and newest export_time (bq). A delivery
whose fingerprint is the one its month was imported with holds nothing new, so a scheduled fetch
can skip downloading it (services/deliveries.py); None means unknown, always downloaded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from billing_ingest.sources import SourceAccessError, SourceFetchError
from billing_ingest.sources.parts import parts_check

SCHEMES = ("s3", "az", "gs", "bq")
AWS_FORMATS = ("aws-cur", "focus")
AZURE_FORMATS = ("azure", "focus")
BIGQUERY_FORMATS = ("gcp-bigquery",)
# Any file a billing parser reads can sit in a bucket: BigQuery or FOCUS exports, or copies.
GCS_FORMATS = (
    "gcp-bigquery",
    "focus",
    "aws-cur",
    "azure",
    "coreweave",
    "coreweave-invoice",
    "opencost-cloudcost",
)


@dataclass(frozen=True)
class DeliveryPart:
    """One downloaded data file of a delivery and its remote name (shown in errors)."""

    path: Path
    label: str


@dataclass
class Delivery:
    """One unit to import as one batch; ``fetch(folder)`` downloads its parts, in order."""

    label: str  # remote name shown in reports and recorded on a failed batch
    source: str
    billing_period: str  # "YYYY-MM", from the store's layout ("" for a lone gs:// object)
    fetch: Callable[[Path], list[DeliveryPart]]
    # sha256 hex of the delivery's version as listed (see the module docstring), or None.
    fingerprint: str | None = None


def uri_scheme(value: str) -> str | None:
    """The scheme of a storage URI (``s3``, ``az``, ``gs``, ``bq``), or None for a local path."""
    scheme, sep, _ = value.partition("://")
    return scheme.lower() if sep and scheme.lower() in SCHEMES else None


def _split(uri: str) -> tuple[str, str]:
    """(bucket or container, path without surrounding slashes)."""
    rest = uri.partition("://")[2]
    bucket, _, path = rest.partition("/")
    if not bucket:
        raise SourceFetchError(f"{uri}: no bucket or container name")
    return bucket, path.strip("/")


def _check_format(format: str, *, allowed: tuple[str, ...], uri: str) -> None:
    if format not in allowed:
        raise SourceFetchError(
            f"{uri}: --format {format} cannot be read from this store; use one of "
            f"{', '.join(allowed)}"
        )


def _parts(files: list[Path], labels: list[str]) -> list[DeliveryPart]:
    """The downloaded parts, refused (PartsMismatchError) unless they can be one table."""
    parts_check(files, labels=labels)
    return [DeliveryPart(path, label) for path, label in zip(files, labels, strict=True)]


def _fingerprint(format: str, where: str, version: tuple[str, ...] | str | None) -> str | None:
    """sha256 hex of a delivery's version (None when unknown). The format and the store
    location are part of it, so --source naming two exports never makes them look alike."""
    if version is None:
        return None
    pieces = version if isinstance(version, tuple) else (version,)
    # "v1": the recipe's version; a new recipe re-downloads each month once, then matches.
    # JSON, so that no name (they may hold any character) can run into the next one.
    text = json.dumps(["v1", format, where, *pieces])
    return hashlib.sha256(text.encode()).hexdigest()


def _s3_deliveries(uri: str, *, format: str, source: str | None, client: Any) -> list[Delivery]:
    import boto3

    from billing_ingest.sources.aws_s3 import aws_export_fetch, aws_export_plan

    _check_format(format, allowed=AWS_FORMATS, uri=uri)
    bucket, path = _split(uri)
    if not path:
        raise SourceFetchError(f"{uri}: name the export, s3://BUCKET/PREFIX/EXPORT-NAME")
    prefix, _, export_name = path.rpartition("/")
    client = client or boto3.client("s3")
    plans = aws_export_plan(client=client, bucket=bucket, prefix=prefix, export_name=export_name)
    if not plans:
        raise SourceFetchError(
            f"{uri}: no {export_name}-Manifest.json under s3://{bucket}/{path}/metadata/"
        )
    delivery_source = source or f"{format}:s3://{bucket}/{path}"
    deliveries = []
    for plan in plans:

        def fetch(folder: Path, plan: Any = plan) -> list[DeliveryPart]:
            files = aws_export_fetch(client=client, bucket=bucket, plan=plan, dest=folder)
            labels = [f"s3://{bucket}/{key}" for key in plan.data_keys]
            return _parts(files, labels)

        deliveries.append(
            Delivery(
                label=f"s3://{bucket}/{plan.manifest_key}",
                source=delivery_source,
                billing_period=plan.billing_period,
                fetch=fetch,
                fingerprint=_fingerprint(
                    format, f"s3://{bucket}", (plan.manifest_key, plan.manifest_version)
                ),
            )
        )
    return deliveries


def _azure_deliveries(uri: str, *, format: str, source: str | None, client: Any) -> list[Delivery]:
    from billing_ingest.sources.azure_blob import (
        azure_container_client,
        azure_export_fetch,
        azure_export_plan,
    )

    _check_format(format, allowed=AZURE_FORMATS, uri=uri)
    container_name, prefix = _split(uri)
    container = client or azure_container_client(container_name)
    plans = azure_export_plan(container=container, prefix=prefix)
    if not plans:
        raise SourceFetchError(
            f"{uri}: no export runs (<export>/YYYYMMDD-YYYYMMDD/<run>/...) below it"
        )
    deliveries = []
    for plan in plans:

        def fetch(folder: Path, plan: Any = plan) -> list[DeliveryPart]:
            files = azure_export_fetch(container=container, plan=plan, dest=folder)
            labels = [f"az://{container_name}/{name}" for name in plan.blobs]
            return _parts(files, labels)

        deliveries.append(
            Delivery(
                label=f"az://{container_name}/{plan.manifest or plan.run}",
                source=source or f"{format}:az://{container_name}/{plan.export_root}",
                billing_period=plan.billing_period,
                fetch=fetch,
                fingerprint=_fingerprint(format, f"az://{container_name}", plan.version),
            )
        )
    return deliveries


def _bigquery_deliveries(
    uri: str, *, format: str, source: str | None, client: Any
) -> list[Delivery]:
    from billing_ingest.sources.gcp_bigquery import (
        bigquery_client,
        bigquery_export_parse,
        bigquery_export_plan,
        bigquery_month_fetch,
    )

    _check_format(format, allowed=BIGQUERY_FORMATS, uri=uri)
    export = bigquery_export_parse(uri)
    client = client or bigquery_client(project=export.job_project)
    plans = bigquery_export_plan(client=client, export=export)
    deliveries = []
    for plan in plans:

        def fetch(folder: Path, plan: Any = plan) -> list[DeliveryPart]:
            path = bigquery_month_fetch(client=client, export=export, plan=plan, dest=folder)
            return [DeliveryPart(path, path.name)]

        deliveries.append(
            Delivery(
                label=f"{export.uri}?month={plan.month}",
                # Months left out of the source: every month of the table restates its own.
                source=source or f"{format}:{export.uri}",
                billing_period=plan.billing_period,
                fetch=fetch,
                fingerprint=_fingerprint(format, f"{export.uri}?month={plan.month}", plan.version),
            )
        )
    return deliveries


def _gcs_deliveries(uri: str, *, format: str, source: str | None, client: Any) -> list[Delivery]:
    from billing_ingest.sources.gcp_storage import (
        gcs_client,
        gcs_delivery_fetch,
        gcs_export_plan,
    )

    _check_format(format, allowed=GCS_FORMATS, uri=uri)
    bucket, prefix = _split(uri)
    client = client or gcs_client()
    plans = gcs_export_plan(client=client, bucket=bucket, prefix=prefix)
    if not plans:
        raise SourceFetchError(
            f"{uri}: no billing files below it (zero-byte folder objects, _SUCCESS-style "
            "markers, manifests and non-data files are skipped)"
        )
    deliveries = []
    for plan in plans:

        def fetch(folder: Path, plan: Any = plan) -> list[DeliveryPart]:
            files = gcs_delivery_fetch(client=client, plan=plan, dest=folder)
            labels = [f"gs://{bucket}/{obj.name}" for obj in plan.objects]
            return _parts(files, labels)

        deliveries.append(
            Delivery(
                label=plan.label,
                # The export root for a month folder (every month restates its own), the
                # object itself for a lone object.
                source=source or f"{format}:{plan.source_uri}",
                billing_period=plan.billing_period,
                fetch=fetch,
                fingerprint=_fingerprint(format, f"gs://{bucket}", plan.version),
            )
        )
    return deliveries


def uri_deliveries(
    uri: str, *, format: str, source: str | None = None, client: Any = None
) -> list[Delivery]:
    """The deliveries an export URI holds now, sorted by billing period (nothing downloaded).

    Raises SourceAccessError when the store refuses and SourceFetchError when the URI or the
    export's layout is unusable. ``client`` (an S3 client, an Azure ContainerClient, a BigQuery
    or a Cloud Storage Client) replaces the one built from the environment."""
    scheme = uri_scheme(uri)
    if scheme == "s3":
        return _s3_deliveries(uri, format=format, source=source, client=client)
    if scheme == "az":
        return _azure_deliveries(uri, format=format, source=source, client=client)
    if scheme == "bq":
        return _bigquery_deliveries(uri, format=format, source=source, client=client)
    if scheme == "gs":
        return _gcs_deliveries(uri, format=format, source=source, client=client)
    raise SourceAccessError(f"{uri}: not an s3://, az://, gs:// or bq:// URI")
