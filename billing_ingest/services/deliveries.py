"""Import what a billing export URI holds now: each delivery one batch (sources/uris.py).

Shared by `ingest_billing URI` and the scheduled fetch of a BillingSource, which differ in how a
batch's parts are run: the command fans them out over the workers and waits for the chord; a
scheduled fetch, itself a task, loads them in its own process (a task must not wait on other
tasks, and the parts are files in its temporary folder).

They differ too in what they download. Each delivery's fingerprint (what the store's listing
says about its version, see uris.py) is recorded on the batch it produced. A scheduled fetch
(billing_uri_refresh) skips a delivery whose fingerprint is the one of its month's current batch
(the newest SUCCEEDED batch of the same source holding that billing period): nothing new was
written, so downloading it again would only find the same bytes, every month on every run. The
command always downloads, as someone who runs it by hand means to.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from billing_ingest.models import ImportBatch
from billing_ingest.services.batches import import_batch_record_failure
from billing_ingest.services.billing import BillingFile, billing_batch_create
from billing_ingest.sources import SourceFetchError
from billing_ingest.sources.uris import Delivery, uri_deliveries

# Takes a new pending batch to its end and returns it.
BatchRun = Callable[[ImportBatch], ImportBatch]
# Told each delivery's remote name and its finished (or duplicate, or failed) batch.
BatchReport = Callable[[str, ImportBatch], None]


@dataclass(frozen=True)
class UnchangedDelivery:
    """A delivery not downloaded: its month's current batch came from this same version."""

    label: str
    billing_periods: list[str]
    batch_id: int  # the batch that holds it


@dataclass
class UriRefresh:
    """What billing_uri_refresh did: the batches it recorded, and the deliveries it skipped."""

    batches: list[ImportBatch] = field(default_factory=list)
    unchanged: list[UnchangedDelivery] = field(default_factory=list)


@dataclass(frozen=True)
class _Current:
    id: int
    billing_periods: list[str]
    file_sha256: str
    fingerprint: str


def _current_batch(delivery: Delivery) -> _Current | None:
    """The newest SUCCEEDED batch of the delivery's source holding its billing period (any,
    for a delivery without one: a lone object is a source of its own)."""
    rows = (
        ImportBatch.objects.filter(
            kind=ImportBatch.Kind.BILLING,
            source=delivery.source,
            status=ImportBatch.Status.SUCCEEDED,
        )
        .order_by("-id")
        .values_list("id", "billing_periods", "file_sha256", "delivery_fingerprint")
    )
    # Filtered here, not in SQL: JSON containment is not a lookup SQLite has. A source keeps
    # about one SUCCEEDED batch per month, so these are few rows.
    for batch_id, periods, sha, fingerprint in rows:
        if not delivery.billing_period or delivery.billing_period in periods:
            return _Current(batch_id, list(periods), sha, fingerprint)
    return None


def _unchanged(delivery: Delivery) -> UnchangedDelivery | None:
    if delivery.fingerprint is None:
        return None
    current = _current_batch(delivery)
    if current is None or current.fingerprint != delivery.fingerprint:
        return None
    periods = [delivery.billing_period] if delivery.billing_period else current.billing_periods
    return UnchangedDelivery(delivery.label, periods, current.id)


def _fingerprint_record(delivery: Delivery, batch: ImportBatch) -> None:
    """Record the delivery's fingerprint on the batch holding its content: the new batch, or,
    for a duplicate, the month's current batch with the same bytes. The latter teaches a batch
    imported before fingerprints (or from an earlier version with the same content, like an
    Azure re-run) the version it holds now, so the next fetch can skip it."""
    if delivery.fingerprint is None:
        return
    target: int | None = batch.pk
    if batch.status == ImportBatch.Status.DUPLICATE:
        current = _current_batch(delivery)
        same = current is not None and current.file_sha256 == batch.file_sha256
        target = current.id if current is not None and same else None
    if target is not None:
        ImportBatch.objects.filter(id=target).update(delivery_fingerprint=delivery.fingerprint)


def billing_delivery_ingest(
    *, delivery: Delivery, folder: Path, format: str, run: BatchRun
) -> ImportBatch:
    """Download one delivery's parts into ``folder`` and import them as one batch.

    Parts that cannot be fetched (a manifest naming a missing file, parts that are not one
    table) are recorded as a failed batch of the delivery's source, so the month's earlier data
    stays and the failure shows in the import history. Content seen before is a DUPLICATE batch,
    never run."""
    try:
        parts = delivery.fetch(folder)
    except SourceFetchError as exc:
        return import_batch_record_failure(
            kind=ImportBatch.Kind.BILLING,
            format=format,
            source=delivery.source,
            file_name=delivery.label,
            error=f"{delivery.label}: {exc}",
        )
    batch = billing_batch_create(
        format=format,
        source=delivery.source,
        # Absolute, so a worker started in another directory finds the files.
        files=[BillingFile(part.path.resolve(), part.label) for part in parts],
        name=delivery.label,
    )
    # Before the run: the batch only counts as the month's once it has SUCCEEDED anyway.
    _fingerprint_record(delivery, batch)
    if batch.status != ImportBatch.Status.PENDING:
        return batch
    return run(batch)


def _deliveries_ingest(
    deliveries: list[Delivery],
    *,
    format: str,
    run: BatchRun,
    report: BatchReport | None,
    skip_unchanged: bool,
) -> UriRefresh:
    """Each delivery downloaded into its own temporary folder, removed once its batch has run,
    so the disk holds one month at a time."""
    done = UriRefresh()
    with tempfile.TemporaryDirectory(prefix="ingest-billing-") as tmp:
        for index, delivery in enumerate(deliveries):
            unchanged = _unchanged(delivery) if skip_unchanged else None
            if unchanged is not None:
                done.unchanged.append(unchanged)
                continue
            folder = Path(tmp) / str(index)
            batch = billing_delivery_ingest(
                delivery=delivery, folder=folder, format=format, run=run
            )
            shutil.rmtree(folder, ignore_errors=True)
            if report is not None:
                report(delivery.label, batch)
            done.batches.append(batch)
    return done


def billing_uri_ingest(
    *,
    uri: str,
    format: str,
    run: BatchRun,
    source: str | None = None,
    report: BatchReport | None = None,
    client: Any = None,
) -> list[ImportBatch]:
    """Import every delivery ``uri`` holds now, in billing period order; return their batches.

    Raises SourceFetchError (SourceAccessError when the store refuses) before anything is
    recorded when the URI, its format or the store's layout is unusable. ``source`` replaces
    the default FORMAT:URI-of-the-export; ``client`` the store client built from the
    environment. Every delivery is downloaded (content seen before is a DUPLICATE batch)."""
    deliveries = uri_deliveries(uri, format=format, source=source, client=client)
    return _deliveries_ingest(
        deliveries, format=format, run=run, report=report, skip_unchanged=False
    ).batches


def billing_uri_refresh(
    *, uri: str, format: str, run: BatchRun, force: bool = False, client: Any = None
) -> UriRefresh:
    """billing_uri_ingest for scheduled fetches: deliveries whose fingerprint is their month's
    current batch's are not downloaded, and no batch is recorded for them (``force``: download
    every delivery anyway, as billing_uri_ingest does)."""
    deliveries = uri_deliveries(uri, format=format, client=client)
    return _deliveries_ingest(
        deliveries, format=format, run=run, report=None, skip_unchanged=not force
    )
