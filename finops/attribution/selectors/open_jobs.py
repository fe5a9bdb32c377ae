"""Reads: jobs with no end that their cluster's newer job imports no longer list.

A job stored running (`End=Unknown`, a pod Running) is charged as cost to date, up to the end of
every later month. A real export of a later window (`sacct -S <start> -E <end>`, the pod list)
lists every job that ran in it, a job still running too, and a listing updates the job's record
and its batch (services/jobs.py). So an open job whose record still points at an older batch
than its cluster's newest successful jobs import was not listed by that import: it most likely
ended unseen, and the ledger keeps charging it (the close check "open jobs", the Imports page).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db.models import Count, F, Max, Min, OuterRef, QuerySet, Subquery

from billing_ingest.models import ImportBatch, JobRecord
from finops.attribution.models import AllocatedCost
from finops.attribution.selectors.reporting import currency_order
from finops.core.money import MoneySum


@dataclass(frozen=True)
class OpenJobsCluster:
    cluster: str
    jobs: int
    oldest_start: datetime


@dataclass(frozen=True)
class OpenJobs:
    """Open jobs no newer import listed; `charged`: the amortised cost the month's ledger
    charges them, per billing currency (empty without a month)."""

    jobs: int
    clusters: list[OpenJobsCluster]
    charged: dict[str, Decimal]


def _unlisted_open_jobs(started_before: datetime | None) -> QuerySet[JobRecord]:
    newest = (
        ImportBatch.objects.filter(
            kind=ImportBatch.Kind.JOBS,
            status=ImportBatch.Status.SUCCEEDED,
            source=OuterRef("cluster"),
        )
        .order_by("-id")
        .values("id")[:1]
    )
    jobs = JobRecord.objects.filter(end__isnull=True, start__isnull=False)
    if started_before is not None:
        jobs = jobs.filter(start__lt=started_before)
    return jobs.annotate(newest_batch=Subquery(newest)).filter(batch_id__lt=F("newest_batch"))


def open_jobs_unlisted(
    *, started_before: date | None = None, charged_in: date | None = None
) -> OpenJobs:
    """Jobs with no end, started before the month `started_before` (any start without it),
    whose cluster has a newer successful jobs import that did not list them; with
    `charged_in`, the amortised cost that month's ledger charges them."""
    since = None
    if started_before is not None:
        since = datetime(started_before.year, started_before.month, 1, tzinfo=UTC)
    jobs = _unlisted_open_jobs(since)
    rows = (
        jobs.order_by()
        .values("cluster")
        .annotate(n=Count("id"), oldest=Min("start"))
        .order_by("cluster")
    )
    clusters = [OpenJobsCluster(r["cluster"], r["n"], r["oldest"]) for r in rows]
    charged: dict[str, Decimal] = {}
    if charged_in is not None and clusters:
        sums = dict(
            AllocatedCost.objects.filter(
                billing_period=charged_in.replace(day=1), job_id__in=jobs.values("id")
            )
            .order_by()
            .values_list("billing_currency")
            .annotate(total=MoneySum("amount"))
        )
        charged = {c: sums[c] for c in sorted(sums, key=currency_order)}
    return OpenJobs(jobs=sum(c.jobs for c in clusters), clusters=clusters, charged=charged)


def ledger_latest_month() -> date | None:
    """The newest billing month the ledger holds, or None."""
    latest: date | None = AllocatedCost.objects.aggregate(latest=Max("billing_period"))["latest"]
    return latest
