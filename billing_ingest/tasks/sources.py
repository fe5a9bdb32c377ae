"""Scheduled billing source fetches: a dispatcher the 6-hourly schedule runs, and one fetch per
source (see finops/celery.py for why every 6 hours, and billing_ingest.services.sources)."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from celery import Task, shared_task

from billing_ingest.services.sources import (
    FETCH_SOFT_TIME_LIMIT,
    FETCH_TIME_LIMIT,
    billing_source_fetch,
    billing_source_ids_enabled,
)
from billing_ingest.sources import SourceFetchError
from finops.core.pipeline_wake import pipeline_kick

__all__ = ["fetch_billing_source", "fetch_billing_sources_all"]

logger = logging.getLogger("finops.billing_ingest")

# A queued fetch older than this is dropped: the next schedule's (6 hours on) is as fresh.
FETCH_EXPIRES = 5 * 3600
MAX_RETRIES = 3
# Seconds before retry 1, 2, 3 (60, 120, 240): past throttling or a brief outage, and long
# before the next schedule.
RETRY_BACKOFF = 60


@shared_task(
    bind=True,
    name="billing_ingest.tasks.sources.fetch_billing_source",
    acks_late=True,
    max_retries=MAX_RETRIES,
    soft_time_limit=FETCH_SOFT_TIME_LIMIT,
    time_limit=FETCH_TIME_LIMIT,
)
def fetch_billing_source(self: Task, source_id: int, force: bool = False) -> dict[str, Any]:
    """Fetch one billing source and import what is new; the outcome is recorded on the source.
    ``force`` downloads even the deliveries whose fingerprint says nothing changed.

    Only transient failures (connection refused, timeouts, throttling, 5xx) are retried, with
    backoff; a refusal (access denied, bad credentials) or an unusable export or format fails
    at once, as retrying would only repeat it. Safe to run twice: the claim lets one run fetch
    and the other skip (also a copy the broker redelivers: acks_late, and Redis redelivers after
    CELERY_VISIBILITY_TIMEOUT), and a delivery seen before is not downloaded again (or, forced,
    is a duplicate)."""
    result = billing_source_fetch(source_id=source_id, force=force)
    if result.transient and self.request.retries < MAX_RETRIES:
        countdown = RETRY_BACKOFF * 2**self.request.retries
        raise self.retry(exc=SourceFetchError(result.message), countdown=countdown)
    if result.months:
        # Each batch that settled recorded its months (the nightly run only covers the current
        # and previous month; restatements reach further back): start their pipeline now.
        pipeline_kick()
    return asdict(result)


@shared_task(
    name="billing_ingest.tasks.sources.fetch_billing_sources_all",
    soft_time_limit=60,
    time_limit=90,
)
def fetch_billing_sources_all() -> list[int]:
    """Queue one fetch per enabled billing source; returns their ids. Fanned out so one slow
    or unreachable store does not hold up the others."""
    source_ids = billing_source_ids_enabled()
    for source_id in source_ids:
        fetch_billing_source.apply_async(args=(source_id,), expires=FETCH_EXPIRES)
    return source_ids
