"""Reads for the runs pages: the visible run rollups and one run's jobs with their cost from
the ledger (AllocatedCost).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import FloatField, QuerySet
from django.db.models.functions import Cast

from billing_ingest.models import JobRecord
from finops.attribution.models import (
    AllocatedCost,
    RunCost,
)
from finops.attribution.selectors.reporting import (
    SECONDS_PER_HOUR,
    ZERO,
    visible_to,
)
from finops.core.money import MoneySum, exact_sum
from finops.org.models import Team


def run_cost_list_visible(*, teams: QuerySet[Team], include_unowned: bool) -> QuerySet[RunCost]:
    """Run rollups the viewer may see, ready for RunCostFilterSet (month, team, ...)."""
    # Cast: on SQLite money is stored as text, where "9" sorts above "10".
    by_cost = Cast("cost", output_field=FloatField()).desc()
    qs = RunCost.objects.select_related("team").order_by("-billing_period", by_cost, "run_id")
    return visible_to(qs, teams=teams, include_unowned=include_unowned)


@dataclass
class RunJobRow:
    job: JobRecord | None
    currency: str
    cost: Decimal
    gpu_seconds: Decimal

    @property
    def gpu_hours(self) -> Decimal:
        return self.gpu_seconds / SECONDS_PER_HOUR


@dataclass
class RunDetail:
    team: Team
    run_id: str
    month: date
    # The run's rollups: one per (cluster, currency).
    rollups: list[RunCost]
    # Ledger cost grouped by job and currency; job None is cost on the run but no job.
    jobs: list[RunJobRow]


def run_detail(*, team: Team, run_id: str, month: date) -> RunDetail | None:
    """A run's rollups and its jobs with their cost from the ledger; None when unknown."""
    rollups = list(
        RunCost.objects.filter(billing_period=month, team=team, run_id=run_id).order_by(
            "cluster", "billing_currency"
        )
    )
    grouped = list(
        AllocatedCost.objects.filter(billing_period=month, team=team, run_id=run_id)
        .order_by()
        .values("job_id", "billing_currency")
        .annotate(cost=MoneySum("amount"), gpu_seconds=exact_sum("gpu_seconds", decimal_places=6))
    )
    if not rollups and not grouped:
        return None
    jobs_by_id = JobRecord.objects.in_bulk([g["job_id"] for g in grouped if g["job_id"]])
    rows = [
        RunJobRow(
            job=jobs_by_id.get(g["job_id"]) if g["job_id"] else None,
            currency=g["billing_currency"],
            cost=g["cost"],
            gpu_seconds=g["gpu_seconds"] or ZERO,
        )
        for g in grouped
    ]
    far_future = date.max
    rows.sort(
        key=lambda r: (
            r.job is None,
            (r.job.start.date() if r.job and r.job.start else far_future),
            r.job.job_id if r.job else "",
            r.job.attempt if r.job else 0,
        )
    )
    return RunDetail(team=team, run_id=run_id, month=month, rollups=rollups, jobs=rows)
