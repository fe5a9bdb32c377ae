"""How the import commands start the pipeline (finops.pipeline) and say what it did."""

from __future__ import annotations

import datetime as dt

from django.core.management.base import BaseCommand
from django.db import transaction

from billing_ingest.services.months import month_changes_record
from finops.core.months import month_format
from finops.core.pipeline_wake import pipeline_kick

# Seconds to wait for the pipeline to claim the months (not for it to finish: the pipeline
# page and the reconciliation's stale flag show that). Eager, it has finished by then.
CLAIM_WAIT = 30.0


def start_pipeline(command: BaseCommand, *, months: list[dt.date]) -> None:
    """Wake the pipeline for the months whose changes were recorded (first days) and print one
    line per month: its run's status, or "queued" (a worker, or the watchdog's next sweep, will
    start it)."""
    labels = sorted({month_format(m) for m in months})
    if not labels:
        return
    outcome = pipeline_kick(wait=CLAIM_WAIT) or {}
    for label in labels:
        run = outcome.get(label)
        if run is None:
            command.stdout.write(f"attribution {label}: queued (see /pipeline/)")
            continue
        stream = command.stderr if run["status"] == "failed" else command.stdout
        stream.write(f"attribution {label}: {run['status']}")
        if run["error"]:
            stream.write(f"  pipeline run {run['run']}: {run['error']}")


def request_pipeline(command: BaseCommand, *, months: list[str], kind: str) -> None:
    """Record the months as changed (by jobs, say) and start their pipeline."""
    if not months:
        return
    with transaction.atomic():
        changes = month_changes_record(months=months, kind=kind)
    start_pipeline(command, months=[c.month for c in changes])
