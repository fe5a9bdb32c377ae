"""Download Azure Cost Management exports from Blob Storage, one delivery per date range.

An export writes ``<root>/<export>/<YYYYMMDD-YYYYMMDD>/<run-id>/part_N_NNNN.csv[.gz]`` (or
``.parquet``), and newer exports add a ``manifest.json`` to the run folder, written last, that
lists the run's blobs. Older exports write ``<root>/<export>/<YYYYMMDD-YYYYMMDD>/<file>.csv``
with a new file per run. Every run re-delivers the whole range, so the newest run of each date
range is the data now:

- if any run of the range has a manifest, the newest manifest (by Last-Modified) wins and its
  blob list is the delivery (a run without a manifest may still be being written);
- otherwise the run whose newest blob is newest wins, with all its data blobs.

A run's version is its blob names with their ETags (and the manifest's), all from the listing:
a run whose version was imported before has nothing new. Blob names are never local paths: each
blob is downloaded to a numbered file (sources/local.py), since a name may start with ``/``.

The connection string comes from AZURE_STORAGE_CONNECTION_STRING.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient

from billing_ingest.sources import MissingPartError, SourceAccessError, SourceFetchError
from billing_ingest.sources.local import local_part_path

CONNECTION_ENV = "AZURE_STORAGE_CONNECTION_STRING"
_RANGE_RE = re.compile(r"^(\d{8})-(\d{8})$")
_DATA_SUFFIXES = (".csv", ".csv.gz", ".gz", ".parquet")
_MANIFEST = "manifest.json"
_DIGITS = re.compile(r"(\d+)")


@dataclass
class AzureRunPlan:
    """The newest run of one export and date range: the blobs to download, in part order."""

    export_root: str  # blob path of the export folder, e.g. "costs/gpu-actual"
    date_range: str  # "YYYYMMDD-YYYYMMDD"
    run: str  # run folder (or, for single-file exports, the file) path in the container
    manifest: str | None
    blobs: list[str]
    # The listed ETag of the manifest and of each blob ("" for one not listed): the run's
    # version, which changes when any of them is written again.
    etags: dict[str, str] = field(default_factory=dict)

    @property
    def version(self) -> tuple[str, ...]:
        names = [self.manifest] if self.manifest else []
        return tuple(f"{name}\t{self.etags.get(name, '')}" for name in [*names, *self.blobs])

    @property
    def billing_period(self) -> str:
        start = self.date_range[:8]
        return f"{start[:4]}-{start[4:6]}"


@dataclass
class _Blob:
    name: str
    last_modified: datetime
    etag: str


def azure_container_client(container: str) -> ContainerClient:
    conn = os.environ.get(CONNECTION_ENV, "")
    if not conn:
        raise SourceAccessError(f"set {CONNECTION_ENV} to read az:// exports")
    try:
        service = BlobServiceClient.from_connection_string(conn)
    except (ValueError, AzureError) as exc:
        raise SourceAccessError(f"{CONNECTION_ENV} is not usable ({exc})") from None
    return service.get_container_client(container)


def _access_error(exc: Exception, *, what: str) -> SourceAccessError:
    reason = getattr(exc, "reason", None) or type(exc).__name__
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)  # StorageErrorCode enum -> "AuthorizationFailure"
    detail = f"{code}: {reason}" if code else str(reason)
    return SourceAccessError(f"cannot read {what} ({detail})")


def _natural(name: str) -> list[Any]:
    # part_2 before part_10.
    return [int(piece) if piece.isdigit() else piece for piece in _DIGITS.split(name)]


def _is_data(name: str) -> bool:
    return name.lower().endswith(_DATA_SUFFIXES)


def _runs(blobs: list[_Blob]) -> dict[tuple[str, str], dict[str, list[_Blob]]]:
    """{(export root, date range): {run path: blobs}} for every blob below a date range."""
    grouped: dict[tuple[str, str], dict[str, list[_Blob]]] = {}
    for blob in blobs:
        parts = blob.name.split("/")
        index = next((i for i, p in enumerate(parts[:-1]) if _RANGE_RE.match(p)), None)
        if index is None:
            continue
        rest = parts[index + 1 :]
        root, date_range = "/".join(parts[:index]), parts[index]
        # A file directly in the range folder is a run of its own (older exports).
        run = "/".join(parts[: index + 2]) if len(rest) >= 2 else blob.name
        grouped.setdefault((root, date_range), {}).setdefault(run, []).append(blob)
    return grouped


def _manifest_blobs(container: ContainerClient, *, run: str, manifest: str) -> list[str]:
    try:
        body = container.download_blob(manifest).readall()
    except AzureError as exc:
        raise _access_error(exc, what=f"manifest {manifest}") from None
    try:
        document = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SourceFetchError(f"{manifest}: not JSON ({exc})") from None
    listed = document.get("blobs") if isinstance(document, dict) else None
    if not isinstance(listed, list):
        raise SourceFetchError(f"{manifest}: no blobs list")
    names = []
    for item in listed:
        name = item.get("blobName") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name or ".." in PurePosixPath(name).parts:
            raise SourceFetchError(f"{manifest}: unusable blob entry {item!r}")
        name = name.lstrip("/")
        # Names are container paths; accept bare file names (relative to the run) too.
        if "/" not in name:
            name = f"{run}/{name}"
        names.append(name)
    return names


def _newest_run(
    container: ContainerClient, *, root: str, date_range: str, runs: dict[str, list[_Blob]]
) -> AzureRunPlan | None:
    with_manifest = {
        run: next(b for b in blobs if b.name.endswith(f"/{_MANIFEST}"))
        for run, blobs in runs.items()
        if any(b.name.endswith(f"/{_MANIFEST}") for b in blobs)
    }
    if with_manifest:
        run, manifest = max(with_manifest.items(), key=lambda i: (i[1].last_modified, i[0]))
        names = _manifest_blobs(container, run=run, manifest=manifest.name)
        return AzureRunPlan(root, date_range, run, manifest.name, names)
    data_runs = {run: [b for b in blobs if _is_data(b.name)] for run, blobs in runs.items()}
    data_runs = {run: blobs for run, blobs in data_runs.items() if blobs}
    if not data_runs:
        return None
    run, blobs = max(data_runs.items(), key=lambda i: (max(b.last_modified for b in i[1]), i[0]))
    names = sorted((b.name for b in blobs), key=_natural)
    return AzureRunPlan(root, date_range, run, None, names)


def azure_export_plan(*, container: ContainerClient, prefix: str) -> list[AzureRunPlan]:
    """The newest run of every export and date range below ``prefix``, sorted.

    Raises SourceAccessError when the store refuses (credentials, missing container)."""
    where = f"az://{container.container_name}/{prefix}"
    try:
        blobs = [
            _Blob(b.name, b.last_modified, str(b.etag or ""))
            for b in container.list_blobs(name_starts_with=prefix or None)
        ]
    except AzureError as exc:
        raise _access_error(exc, what=where) from None
    # From the whole listing: a manifest may name blobs outside its run's folder.
    etags = {blob.name: blob.etag for blob in blobs}
    plans = []
    for (root, date_range), runs in sorted(_runs(blobs).items()):
        plan = _newest_run(container, root=root, date_range=date_range, runs=runs)
        if plan is not None:
            named = [plan.manifest, *plan.blobs] if plan.manifest else plan.blobs
            plans.append(replace(plan, etags={name: etags.get(name, "") for name in named}))
    return plans


def azure_export_fetch(*, container: ContainerClient, plan: AzureRunPlan, dest: Path) -> list[Path]:
    """Download the run's blobs into ``dest`` (numbered, see sources/local.py), in part order.
    A blob the manifest lists but the container lacks raises MissingPartError naming it."""
    files = []
    for number, name in enumerate(plan.blobs):
        local = local_part_path(dest, number, name)
        try:
            with local.open("wb") as handle:
                container.download_blob(name).readinto(handle)
        except ResourceNotFoundError:
            where = f"az://{container.container_name}"
            listed_by = f"manifest {where}/{plan.manifest}" if plan.manifest else "the listing"
            raise MissingPartError(
                f"{listed_by} names blob {where}/{name}, which is not in the container"
            ) from None
        except AzureError as exc:
            where = f"az://{container.container_name}/{name}"
            raise _access_error(exc, what=where) from None
        files.append(local)
    return files
