"""Import what a billing export URI holds now: each delivery one batch (sources/uris.py).

Shared by `ingest_billing URI` and the scheduled fetch of a BillingSource, which differ only in
how a batch's parts are run: the command fans them out over the workers and waits for the
chord; a scheduled fetch, itself a task, loads them in its own process (a task must not wait on
other tasks, and the parts are files in its temporary folder).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
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
    if batch.status != ImportBatch.Status.PENDING:
        return batch
    return run(batch)


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
    environment. Each delivery is downloaded into its own temporary folder, removed once its
    batch has run, so the disk holds one month at a time."""
    deliveries = uri_deliveries(uri, format=format, source=source, client=client)
    batches = []
    with tempfile.TemporaryDirectory(prefix="ingest-billing-") as tmp:
        for index, delivery in enumerate(deliveries):
            folder = Path(tmp) / str(index)
            batch = billing_delivery_ingest(
                delivery=delivery, folder=folder, format=format, run=run
            )
            shutil.rmtree(folder, ignore_errors=True)
            if report is not None:
                report(delivery.label, batch)
            batches.append(batch)
    return batches
