"""Scheduled fetches of billing sources: claim, discover, import, record.

A fetch claims its source with a conditional UPDATE (only a source nobody is fetching, or whose
claim is older than any fetch can run, is taken; the row count says whether this run got it),
so two overlapping runs (a slow fetch and the next schedule, or "fetch now" twice) never fetch
one export together. It then resolves an AWS export's location with bcm-data-exports when one
is named, imports the URI as `ingest_billing URI` does (services.deliveries: one batch per
delivery, duplicates recorded and skipped, a restated month replacing the old one), and records
what happened on the source, releasing the claim. Unlike the command, it does not download a
delivery whose fingerprint (manifest ETag, blob ETags, object generations) is the one its month
was imported with: it is reported "unchanged" and no batch is recorded, unless forced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from billing_ingest.models import BillingSource, ImportBatch
from billing_ingest.parsers import billing_parser
from billing_ingest.services.billing import billing_batch_ingest
from billing_ingest.services.deliveries import UriRefresh, billing_uri_refresh
from billing_ingest.services.months import billing_months_touched
from billing_ingest.sources import SourceFetchError
from billing_ingest.sources.aws_data_exports import aws_export_discover
from billing_ingest.sources.transient import source_error_transient
from billing_ingest.sources.uris import uri_scheme

# One fetch lists the export, downloads every month it holds and loads the new ones. A first
# fetch of a large export (many months of multi-GB CUR) is the long case; two hours is far more
# than that takes, and well inside the 6-hour schedule.
FETCH_SOFT_TIME_LIMIT = 2 * 3600
FETCH_TIME_LIMIT = FETCH_SOFT_TIME_LIMIT + 5 * 60
# A claim this old belongs to a run killed without releasing it (hard time limit, lost worker):
# longer than the hard limit, so a live run is never taken over, and shorter than the schedule,
# so the next scheduled run recovers the source.
CLAIM_EXPIRES = timedelta(seconds=FETCH_TIME_LIMIT + 10 * 60)

SKIPPED = "skipped"


@dataclass
class SourceFetchResult:
    """What one fetch did. ``status`` is a BillingSource.Status value, or "skipped" when the
    source was disabled or claimed by another run (and nothing was recorded)."""

    source_id: int
    status: str
    message: str
    batch_ids: list[int] = field(default_factory=list)
    # Billing months whose rows changed: the ones to re-attribute.
    months: list[str] = field(default_factory=list)
    # Billing months whose delivery had nothing new (not downloaded, or a duplicate).
    unchanged: list[str] = field(default_factory=list)
    # The failure may pass if tried again later (connection refused, throttling, 5xx).
    transient: bool = False


@dataclass(frozen=True)
class _Location:
    uri: str
    format: str
    discovered: bool  # from bcm-data-exports: written back to the source
    note: str = ""  # said with the result, e.g. that AWS reports the export unhealthy


def billing_source_check(
    *, format: str, uri: str, aws_export_arn: str, aws_export_name: str, source_id: int | None
) -> None:
    """Refuse a billing source (new, or source_id changed) that could not be fetched: no
    location, a URI of no known scheme, a non-S3 URI beside an AWS export, an unknown format,
    no format where no AWS export names one, or the URI and format another source fetches.
    Raises ValidationError with a message per field (the admin form shows them)."""
    named = bool(aws_export_arn or aws_export_name)
    errors: dict[str, str] = {}
    if not uri and not named:
        errors["uri"] = "give a URI, or an AWS export ARN or name to discover it"
    elif uri and uri_scheme(uri) is None:
        errors["uri"] = "not an s3://, az://, gs:// or bq:// URI"
    elif named and uri and uri_scheme(uri) != "s3":
        errors["uri"] = "an AWS export is on S3: leave the URI empty (it is discovered)"
    if format:
        try:
            billing_parser(format)
        except ValueError as exc:
            errors["format"] = str(exc)
    elif not named:
        errors["format"] = "needed unless an AWS export is named"
    if uri and not named and not errors:
        # Two sources of one export would only record each other's deliveries as duplicates.
        clash = BillingSource.objects.filter(format=format, uri=uri)
        if source_id is not None:
            clash = clash.exclude(pk=source_id)
        if clash.exists():
            errors["uri"] = f"another billing source already fetches {uri}"
    if errors:
        raise ValidationError(errors)


def billing_source_ids_enabled() -> list[int]:
    return list(
        BillingSource.objects.filter(enabled=True).order_by("id").values_list("id", flat=True)
    )


def billing_source_claim(*, source_id: int) -> datetime | None:
    """Claim an enabled source for this run; returns the claim's time (needed to release it),
    or None when the source is disabled, gone, or claimed by a run still in time."""
    now = timezone.now()
    free = Q(fetch_started_at__isnull=True) | Q(fetch_started_at__lt=now - CLAIM_EXPIRES)
    claimed = BillingSource.objects.filter(free, id=source_id, enabled=True).update(
        fetch_started_at=now
    )
    return now if claimed == 1 else None


def _location(source: BillingSource) -> _Location:
    if source.aws_export_named():
        export = aws_export_discover(
            export_arn=source.aws_export_arn, export_name=source.aws_export_name
        )
        if source.format and source.format != export.format:
            raise SourceFetchError(
                f"AWS data export {export.name} reads {export.table} ({export.format}), but the "
                f"source's format is {source.format}: clear the format or fix it"
            )
        note = "" if export.health == "HEALTHY" else f"AWS reports the export {export.health}"
        return _Location(uri=export.uri, format=export.format, discovered=True, note=note)
    try:
        billing_parser(source.format)
    except ValueError as exc:
        raise SourceFetchError(str(exc)) from None
    return _Location(uri=source.uri, format=source.format, discovered=False)


def _run_here(batch: ImportBatch) -> ImportBatch:
    # The parts are files in this task's temporary folder, and a task must not wait on others:
    # load them one after another in this process (the same part and finish services).
    return billing_batch_ingest(batch_id=batch.pk)


def _summary(source_id: int, refresh: UriRefresh) -> SourceFetchResult:
    batches = refresh.batches
    imported = billing_months_touched(batches=batches)
    duplicates = ImportBatch.Status.DUPLICATE
    unchanged = sorted(
        {m for b in batches if b.status == duplicates for m in b.billing_periods}
        | {m for skipped in refresh.unchanged for m in skipped.billing_periods}
    )
    done = {ImportBatch.Status.SUCCEEDED, ImportBatch.Status.DUPLICATE}
    failed = [b for b in batches if b.status not in done]
    notes = []
    if imported:
        notes.append(f"imported {', '.join(imported)}")
    if unchanged:
        notes.append(f"unchanged {', '.join(unchanged)}")
    if failed:
        errors = "; ".join(b.error or f"{b.file_name}: {b.status}" for b in failed)
        notes.append(f"{len(failed)} of {len(batches)} deliveries failed: {errors}")
    return SourceFetchResult(
        source_id=source_id,
        status=BillingSource.Status.FAILED if failed else BillingSource.Status.SUCCEEDED,
        message="; ".join(notes) or "no deliveries",
        batch_ids=[b.pk for b in batches],
        months=imported,
        unchanged=unchanged,
    )


def _release(
    *, source_id: int, claim: datetime, result: SourceFetchResult, location: _Location | None
) -> None:
    """Record the result and free the source, unless a later run took over a claim this run
    held too long (its record is the newer one)."""
    changes: dict[str, Any] = {
        "fetch_started_at": None,
        "last_fetched_at": timezone.now(),
        "last_status": result.status,
        "last_message": result.message,
    }
    if location is not None and location.discovered:
        changes.update(uri=location.uri, format=location.format)
    BillingSource.objects.filter(id=source_id, fetch_started_at=claim).update(**changes)


def _attempt(source: BillingSource, *, force: bool) -> tuple[SourceFetchResult, _Location | None]:
    """Discover and import; a fetch error is a failed result, not an exception."""
    location = None
    try:
        location = _location(source)
        refresh = billing_uri_refresh(
            uri=location.uri, format=location.format, run=_run_here, force=force
        )
    except SourceFetchError as exc:
        failed = SourceFetchResult(
            source.pk, BillingSource.Status.FAILED, str(exc), transient=source_error_transient(exc)
        )
        return failed, location
    result = _summary(source.pk, refresh)
    if location.note:
        result.message = f"{result.message}; {location.note}"
    return result, location


def billing_source_fetch(*, source_id: int, force: bool = False) -> SourceFetchResult:
    """Fetch one billing source now and record the outcome on it. Idempotent: deliveries
    imported before are not downloaded again (``force``: they are, and recorded as duplicates
    when their bytes are the same), and change nothing.

    A store that refuses, an export that cannot be found or a format that does not fit is
    recorded as a failed fetch (``transient`` tells whether trying later may help); the data
    imported before stays as it was. Anything unexpected (a bug, the soft time limit) is
    recorded too, then raised."""
    claim = billing_source_claim(source_id=source_id)
    if claim is None:
        return SourceFetchResult(source_id, SKIPPED, "disabled, or being fetched by another run")
    try:
        result, location = _attempt(BillingSource.objects.get(id=source_id), force=force)
    except Exception as exc:
        failed = SourceFetchResult(
            source_id, BillingSource.Status.FAILED, f"{type(exc).__name__}: {exc}"
        )
        _release(source_id=source_id, claim=claim, result=failed, location=None)
        raise
    _release(source_id=source_id, claim=claim, result=result, location=location)
    return result
