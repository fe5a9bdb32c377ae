"""Download billing files from Google Cloud Storage (``gs://BUCKET/PREFIX``), one delivery each.

What lands in GCS for billing has no manifest: the BigQuery billing export (or a FOCUS view)
exported to files with ``EXPORT DATA`` / ``bq extract``, usually one folder per invoice month
with sharded parts (``.../2024-09/billing-000000000000.json``), and any other billing export a
user copies there (CUR, Azure, CoreWeave). Deliveries are therefore read from the object paths:

- **Period folders.** The first folder in an object's path that names a billing period groups
  it: ``2024-09``, ``202409``, ``YYYYMMDD-YYYYMMDD`` (the start's month), or one of those after
  ``BILLING_PERIOD=``, ``billing_month=``, ``invoice_month=``, ``invoice.month=``, ``month=`` or
  ``period=`` (any case). Every data object below one period folder belongs to that month's
  delivery, imported as ONE batch whose source is the export root (the path above the period
  folder), so each month restates the one before it and different exports never do.
- **Uploads.** Inside a period folder, the files directly in it are one upload and each
  sub-folder is another (an AWS manifest version, an Azure run, a re-export to a new folder);
  ``key=value`` sub-folders are Hive partitions of the same upload. The newest upload (by the
  newest object it holds) is the delivery, so a newer upload of the month replaces the older
  one instead of being added to it. Re-exporting over the same folder works as well.
- **Lone objects.** An object outside any period folder (or inside one the URI does not cover
  whole, e.g. a URI naming one shard) is a delivery of its own, with its own source: it
  restates only what that same object name delivered before.

Skipped: zero-byte objects (folder placeholders, ``_SUCCESS``), names (below the URI) with a
part starting with ``_`` or ``.`` (``_SUCCESS``, ``_committed_*``, ``_temporary/``), manifests
(``*manifest*.json``) and files that are not .csv, .json(l), .ndjson, .parquet or .gz (or
suffix-less shards, as BigQuery names them when the export URI has no extension).

Credentials are Application Default Credentials; with STORAGE_EMULATOR_HOST set, the client
talks to that emulator anonymously. Planning only lists the bucket: a missing bucket, refused
access or missing credentials stops the import before anything changes. Each listed object is
fetched at the generation listed and streamed to disk, never held in memory, to a numbered file
(sources/local.py). The objects' names and generations are the delivery's version: a delivery
whose version was imported before has nothing new.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from google.api_core import exceptions as api_exceptions
from google.auth import exceptions as auth_exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud.storage import Client
from google.cloud.storage.exceptions import DataCorruption
from requests import RequestException

from billing_ingest.sources import MissingPartError, SourceAccessError, SourceFetchError
from billing_ingest.sources.local import local_part_path

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
_PERIOD_VALUE = (
    r"(?P<year>20\d{2})-?(?P<month>0[1-9]|1[0-2])"  # 2024-09, 202409
    r"|(?P<ryear>20\d{2})(?P<rmonth>0[1-9]|1[0-2])\d{2}-\d{8}"  # 20240901-20240930
)
_PERIOD_RE = re.compile(
    rf"^(?:(?:billing_period|billing_month|invoice_month|invoice\.month|month|period)=)?"
    rf"(?:{_PERIOD_VALUE})$",
    re.IGNORECASE,
)
_HIVE_RE = re.compile(r"^[^=]+=.+$")
_DATA_RE = re.compile(r"\.(?:csv|json|jsonl|ndjson|parquet)(?:\.gz)?$|\.gz$", re.IGNORECASE)
_DIGITS = re.compile(r"(\d+)")
# Listing asks only for what planning reads: buckets of billing exports hold many objects.
_LIST_FIELDS = "items(name,size,generation,timeCreated,updated),nextPageToken"
_EPOCH = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class GcsObject:
    name: str
    generation: int | None  # the version listed; fetched as such, so a delivery is consistent
    created: datetime  # when this generation was written


@dataclass(frozen=True)
class GcsDeliveryPlan:
    """One delivery: the objects to import as one batch (nothing downloaded yet)."""

    bucket: str
    root: str | None  # export root above the period folder; None for a lone object
    folder: str  # the upload folder, or the lone object's name
    billing_period: str  # "YYYY-MM" from the period folder, "" for a lone object
    objects: tuple[GcsObject, ...]

    @property
    def label(self) -> str:
        suffix = "/" if self.root is not None else ""
        return f"gs://{self.bucket}/{self.folder}{suffix}"

    @property
    def version(self) -> tuple[str, ...]:
        """Every object's name and generation (a new write is a new generation; the time it
        was written where the store gives no generation)."""
        return tuple(
            f"{obj.name}#{obj.generation or obj.created.isoformat()}" for obj in self.objects
        )

    @property
    def source_uri(self) -> str:
        """What stays the same from one delivery of a month to the next."""
        name = self.folder if self.root is None else self.root
        return f"gs://{self.bucket}/{name}".rstrip("/")


def gcs_client() -> Client:
    """A client from the environment: the emulator when STORAGE_EMULATOR_HOST is set, else
    Application Default Credentials."""
    project = os.environ.get("GOOGLE_CLOUD_PROJECT")
    if os.environ.get(EMULATOR_ENV):
        # The emulator checks no credentials, but the client still wants a project.
        return Client(project=project or "emulator", credentials=AnonymousCredentials())
    try:
        # Listing and reading objects bill no project, so none is needed when ADC has none.
        return Client(project=project)
    except auth_exceptions.GoogleAuthError as exc:
        raise SourceAccessError(
            f"no Google credentials to read gs:// exports ({exc}); run `gcloud auth "
            "application-default login` or set GOOGLE_APPLICATION_CREDENTIALS"
        ) from None


def _reason(exc: api_exceptions.GoogleAPICallError) -> str:
    """GCS's own words (they name the principal and the permission it lacks), without the
    request URL the client puts in front of them."""
    first = exc.errors[0] if exc.errors else None
    detail = first.get("message") if isinstance(first, dict) else None
    return f"{exc.code} {detail or exc.message}"


def _access_error(exc: Exception, *, what: str) -> SourceAccessError:
    if isinstance(exc, api_exceptions.NotFound):
        # objects.list answers 404 for one reason only.
        return SourceAccessError(f"cannot read {what}: the bucket does not exist")
    if isinstance(exc, api_exceptions.Forbidden | api_exceptions.Unauthorized):
        return SourceAccessError(f"cannot read {what}: access refused ({_reason(exc)})")
    return SourceAccessError(f"cannot read {what} ({type(exc).__name__}: {exc})")


_STORE_ERRORS = (api_exceptions.GoogleAPIError, auth_exceptions.GoogleAuthError, RequestException)


def _created(blob: Any) -> datetime:
    return blob.time_created or blob.updated or _EPOCH


def _list(client: Client, *, bucket: str, prefix: str) -> list[GcsObject]:
    """Objects named ``prefix`` or below ``prefix/`` (so gs://b/exports is not gs://b/exports2)."""
    try:
        blobs = [
            blob
            for blob in client.list_blobs(bucket, prefix=prefix or None, fields=_LIST_FIELDS)
            if not prefix or blob.name == prefix or blob.name.startswith(f"{prefix}/")
        ]
    except _STORE_ERRORS as exc:
        where = f"gs://{bucket}/{prefix}".rstrip("/")
        raise _access_error(exc, what=where) from None
    return [
        GcsObject(blob.name, blob.generation, _created(blob))
        for blob in blobs
        if _is_data(blob.name, size=blob.size or 0, prefix=prefix)
    ]


def _is_data(name: str, *, size: int, prefix: str) -> bool:
    if size == 0 or name.endswith("/"):
        return False
    # Only what is below the URI counts: gs://b/_exports/x.csv may be named on purpose.
    below = PurePosixPath(name).name if name == prefix else name[len(prefix) :].lstrip("/")
    parts = PurePosixPath(below).parts
    if not parts or any(part.startswith(("_", ".")) for part in parts):
        return False
    base = parts[-1]
    if "manifest" in base.lower() and base.lower().endswith(".json"):
        return False
    return bool(_DATA_RE.search(base)) or not PurePosixPath(base).suffix


def _period(folder: str) -> str | None:
    """``YYYY-MM`` when a folder name names a billing period."""
    match = _PERIOD_RE.match(folder)
    if match is None:
        return None
    year = match["year"] or match["ryear"]
    month = match["month"] or match["rmonth"]
    return f"{year}-{month}"


def _period_folder(parts: tuple[str, ...], *, prefix_depth: int) -> tuple[int, str] | None:
    """(index, period) of the first period folder the URI covers whole, if any."""
    for index, part in enumerate(parts[:-1]):
        period = _period(part)
        # A period folder above the URI (which names a shard or a sub-folder inside the month)
        # is not listed whole: importing it as the month would drop the parts not listed.
        if period is not None and index + 1 >= prefix_depth:
            return index, period
    return None


def _upload_key(parts: tuple[str, ...], index: int) -> str:
    """The upload an object below the period folder at ``index`` belongs to: "" for files
    directly in the folder (and Hive partitions below it), else the sub-folder's name."""
    below = parts[index + 1 : -1]
    if not below or _HIVE_RE.match(below[0]):
        return ""
    return below[0]


def _natural(obj: GcsObject) -> list[Any]:
    # billing-2 before billing-10 when shards are not zero-padded.
    return [int(piece) if piece.isdigit() else piece for piece in _DIGITS.split(obj.name)]


def _newest_upload(uploads: dict[str, list[GcsObject]]) -> tuple[str, list[GcsObject]]:
    key, objects = max(uploads.items(), key=lambda i: (max(o.created for o in i[1]), i[0]))
    return key, sorted(objects, key=_natural)


def _month_plans(
    bucket: str, months: dict[tuple[str, str, str], dict[str, list[GcsObject]]]
) -> list[GcsDeliveryPlan]:
    plans = []
    seen: dict[tuple[str, str], str] = {}
    for (root, folder, period), uploads in months.items():
        # Two folders of one month under one export root (2024-09/ and 202409/) would replace
        # each other's rows, whichever came last: refuse rather than pick one silently.
        other = seen.setdefault((root, period), folder)
        if other != folder:
            raise SourceFetchError(
                f"gs://{bucket}/{other}/ and gs://{bucket}/{folder}/ both hold {period}; "
                "keep one folder per month"
            )
        key, objects = _newest_upload(uploads)
        upload_folder = f"{folder}/{key}" if key else folder
        plans.append(GcsDeliveryPlan(bucket, root, upload_folder, period, tuple(objects)))
    return plans


def _plans(bucket: str, objects: Iterable[GcsObject], *, prefix: str) -> list[GcsDeliveryPlan]:
    prefix_depth = len(PurePosixPath(prefix).parts) if prefix else 0
    months: dict[tuple[str, str, str], dict[str, list[GcsObject]]] = {}
    lone = []
    for obj in objects:
        parts = PurePosixPath(obj.name).parts
        found = _period_folder(parts, prefix_depth=prefix_depth)
        if found is None:
            lone.append(GcsDeliveryPlan(bucket, None, obj.name, "", (obj,)))
            continue
        index, period = found
        month = ("/".join(parts[:index]), "/".join(parts[: index + 1]), period)
        months.setdefault(month, {}).setdefault(_upload_key(parts, index), []).append(obj)
    return _month_plans(bucket, months) + lone


def gcs_export_plan(*, client: Client, bucket: str, prefix: str) -> list[GcsDeliveryPlan]:
    """The deliveries below ``gs://bucket/prefix`` (see the module docstring), sorted by billing
    period (lone objects first, by name). Raises SourceAccessError when GCS refuses and
    SourceFetchError when the layout is ambiguous; an empty list when nothing is data."""
    plans = _plans(bucket, _list(client, bucket=bucket, prefix=prefix), prefix=prefix)
    return sorted(plans, key=lambda plan: (plan.billing_period, plan.folder))


def gcs_delivery_fetch(*, client: Client, plan: GcsDeliveryPlan, dest: Path) -> list[Path]:
    """Stream the delivery's objects to numbered files in ``dest``, in part order.

    An object gone (deleted or overwritten) since planning raises MissingPartError naming
    it."""
    bucket = client.bucket(plan.bucket)
    files = []
    for number, obj in enumerate(plan.objects):
        local = local_part_path(dest, number, obj.name)
        uri = f"gs://{plan.bucket}/{obj.name}"
        blob = bucket.blob(obj.name, generation=obj.generation)
        try:
            # raw_download: the stored bytes (gzip stays gzip), which the checksum covers.
            blob.download_to_filename(str(local), raw_download=True)
        except api_exceptions.NotFound:
            raise MissingPartError(
                f"{uri} (generation {obj.generation}) was listed but is gone: deleted or "
                "replaced since; run the import again"
            ) from None
        except DataCorruption as exc:
            raise SourceFetchError(f"{uri}: download failed its checksum ({exc})") from None
        except _STORE_ERRORS as exc:
            raise _access_error(exc, what=uri) from None
        files.append(local)
    return files
