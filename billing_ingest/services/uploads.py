"""Files finance uploads from the browser: saved under FINOPS_DATA_DIR/uploads (a path the
workers share, as the commands' paths are), recorded as a batch, and sent down the same Celery
path as `ingest_billing` / `ingest_jobs`, followed by re-attribution of the months it touched.
The request does not wait: the Imports page polls the batch's progress."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings
from django.utils.text import get_valid_filename

from billing_ingest.models import ImportBatch
from billing_ingest.services.batches import import_batch_create
from billing_ingest.services.billing import BillingFile, billing_batch_create
from billing_ingest.services.billing_files import billing_default_source
from billing_ingest.services.dispatch import billing_batch_dispatch, jobs_batch_dispatch
from billing_ingest.services.jobs import cluster_get_or_create

JOB_FORMATS = ("slurm", "kubernetes", "opencost")


def upload_store(*, name: str, chunks: Iterable[bytes]) -> Path:
    """Write an uploaded file to its own folder under FINOPS_DATA_DIR/uploads; its name kept
    (made safe), because parsers and batch names show it."""
    folder = Path(settings.FINOPS_DATA_DIR) / "uploads" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    path = folder / (get_valid_filename(Path(name).name) or "upload")
    with path.open("wb") as out:
        for chunk in chunks:
            out.write(chunk)
    return path.resolve()


def upload_billing_ingest(*, path: Path, format: str, source: str = "") -> ImportBatch:
    """A billing file as one delivery of one part: the chord of `ingest_billing`. The batch
    wakes the pipeline for the months it touched when it settles (ImportBatch.Pipeline.AUTO)."""
    batch = billing_batch_create(
        format=format,
        source=source or billing_default_source(format=format, path=path),
        files=[BillingFile(path, path.name)],
    )
    if batch.status != ImportBatch.Status.DUPLICATE:
        billing_batch_dispatch(batch_id=batch.pk)
    return batch


def upload_jobs_ingest(*, path: Path, format: str, cluster: str) -> ImportBatch:
    """A job log as `ingest_jobs` imports it: the jobs task, then the pipeline for the billing
    months its jobs touched."""
    if format not in JOB_FORMATS:
        raise ValueError(f"unknown job log format {format!r}")
    cluster_row = cluster_get_or_create(name=cluster or "default")
    batch = import_batch_create(
        kind=ImportBatch.Kind.JOBS, format=format, source=cluster_row.name, path=path
    )
    if batch.status != ImportBatch.Status.DUPLICATE:
        jobs_batch_dispatch(batch_id=batch.pk)
    return batch
