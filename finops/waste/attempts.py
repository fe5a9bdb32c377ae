"""The attempts of runs, read from the jobs and the ledger (DESIGN section 9).

A run (team, run id, currency as RunCost names it) groups every job record the ledger charged
to it: each record of a requeued Slurm job (`sacct -D`), resubmissions under the same run id,
restarted pods. Its attempts are those records in time order, each with its ledger cost per
billing month (so the run's cost includes every attempt), its state, and the GPU utilisation
measured for it where the job was charged what it requested.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from django.db.models import Q

from billing_ingest.models import JobGpuUtilisation, JobRecord, job_gpus_exact
from finops.attribution.inputs.list_cost import MIX_KINDS, OTHER
from finops.attribution.models import AllocatedCost, ChargeBasis
from finops.core.money import MoneySum
from finops.core.sql_arrays import AnyOf, epoch_micros, from_epoch_micros
from finops.run_metrics.models import RunMetricPoint
from finops.run_metrics.progress import training_runs_matching
from finops.run_metrics.selectors import RunKey
from finops.waste.causes import AttemptTimes, Metrics


@dataclass(slots=True)
class Attempt:
    """One job record of a run, with its ledger cost in the run's currency per billing month."""

    pk: int
    cluster: str
    job_id: str
    attempt: int
    state: str
    start: dt.datetime | None
    end: dt.datetime | None
    utilisation: Fraction | None
    # GPUs the attempt held (exact: MIG slices are fractions).
    gpus: Fraction = Fraction(0)
    cost_by_month: dict[dt.date, Decimal] = field(default_factory=dict)
    # How the ledger says its cost was bought (list_cost.pricing_mix: on_demand, spot,
    # commitment, other): the kind that carries most of it, so a job on a spot node is spot.
    pricing: str = OTHER
    # A long-running server or runner, not a training run (JobRecord.service).
    service: bool = False
    # The inference endpoint the pod serves (JobRecord.endpoint), else "": its pods are
    # advised by the endpoint advice (rightsize), not the idle-allocation one.
    endpoint: str = ""

    @property
    def cost(self) -> Decimal:
        return sum(self.cost_by_month.values(), Decimal(0))

    def times(self) -> AttemptTimes:
        return AttemptTimes(
            self.pk, self.state, self.start, self.end, self.utilisation, self.service
        )


def _sort_key(a: Attempt) -> tuple[bool, dt.datetime, str, int]:
    return (a.start is None, a.start or dt.datetime.min.replace(tzinfo=dt.UTC), a.job_id, a.attempt)


@dataclass(frozen=True, slots=True)
class _JobRow:
    pk: int
    cluster: str
    job_id: str
    attempt: int
    state: str
    start: dt.datetime | None
    end: dt.datetime | None
    gpus: Decimal
    gpu_numerator: int | None
    gpu_denominator: int | None
    service: bool
    endpoint: str


def _utilisations(jobs: Iterable[_JobRow]) -> dict[tuple[str, str], Fraction]:
    """Measured utilisation of each job charged as requested (on a `used` cluster the job was
    charged only what it used, and the rest is its node's idle, not the run's). One query."""
    jobs = list(jobs)
    if not jobs:
        return {}
    used = ChargeBasis.objects.filter(basis=ChargeBasis.Basis.USED).values("cluster")
    rows = (
        JobGpuUtilisation.objects.filter(AnyOf("job_id", {j.job_id for j in jobs}))
        .exclude(cluster__in=used)
        .values_list("cluster", "job_id", "utilisation")
    )
    return {(c, j): Fraction(u) for c, j, u in rows}


_MINUS_ONE = Decimal(-1)


def _pricing_of(by_mix: dict[str, Decimal]) -> str:
    """The pricing kind carrying most of a job's cost (ties: the order of MIX_KINDS)."""
    if not by_mix:
        return OTHER
    if len(by_mix) == 1:
        # One kind (most jobs): it wins unless its cost is -1 or less (then an absent kind's
        # -1 does, as below).
        [(kind, cost)] = by_mix.items()
        if cost > _MINUS_ONE:
            return kind
    return max(MIX_KINDS, key=lambda kind: (by_mix.get(kind, Decimal(-1)), -MIX_KINDS.index(kind)))


def run_attempts(keys: Iterable[RunKey]) -> dict[RunKey, list[Attempt]]:
    """The attempts of each run in time order (every month the ledger has for it). A few
    queries for any number of runs."""
    keys = list(keys)
    if not keys:
        return {}
    wanted = {(k.team_id, k.run_id, k.currency): k for k in keys}
    teams = {k.team_id for k in keys}
    team_q = Q(team_id__in={t for t in teams if t is not None})
    if None in teams:
        team_q |= Q(team__isnull=True)
    rows = (
        AllocatedCost.objects.filter(team_q, AnyOf("run_id", {k.run_id for k in keys}))
        .filter(job__isnull=False)
        .order_by()
        .values(
            "team_id", "run_id", "billing_currency", "job_id", "billing_period", "pricing_mix"
        )
        .annotate(cost=MoneySum("amount"))
    )  # fmt: skip
    costs: dict[RunKey, dict[int, dict[dt.date, Decimal]]] = defaultdict(dict)
    mixes: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for row in rows:
        key = wanted.get((row["team_id"], row["run_id"], row["billing_currency"]))
        if key is None:
            continue
        by_month = costs[key].setdefault(row["job_id"], {})
        cost = Decimal(row["cost"] or 0)
        month = row["billing_period"]
        by_month[month] = by_month.get(month, Decimal(0)) + cost
        mix = row["pricing_mix"] if row["pricing_mix"] in MIX_KINDS else OTHER
        by_mix = mixes[row["job_id"]]
        by_mix[mix] = by_mix.get(mix, Decimal(0)) + cost
    # Plain rows, not model instances (a month's runs have tens of thousands of attempts), in
    # one query (the ids as one array), the times as integers (finops.core.sql_arrays).
    wanted_jobs = JobRecord.objects.filter(
        AnyOf("pk", {pk for per_job in costs.values() for pk in per_job})
    )
    jobs: dict[int, _JobRow] = {}
    for pk, cluster, job_id, attempt, state, start, end, *gpus in wanted_jobs.values_list(
        "pk", "cluster", "job_id", "attempt", "state", epoch_micros(wanted_jobs, "start"),
        epoch_micros(wanted_jobs, "end"), "gpus", "gpu_numerator", "gpu_denominator", "service",
        "endpoint",
    ):  # fmt: skip
        jobs[pk] = _JobRow(
            pk, cluster, job_id, attempt, state, from_epoch_micros(start),
            from_epoch_micros(end), *gpus,
        )  # fmt: skip
    utilisation = _utilisations(jobs.values())
    result: dict[RunKey, list[Attempt]] = {key: [] for key in keys}
    for key, per_job in costs.items():
        for pk, by_month in per_job.items():
            job = jobs.get(pk)
            if job is None:
                continue
            result[key].append(
                Attempt(
                    pk=pk,
                    cluster=job.cluster,
                    job_id=job.job_id,
                    attempt=job.attempt,
                    state=job.state,
                    start=job.start,
                    end=job.end,
                    utilisation=utilisation.get((job.cluster, job.job_id)),
                    gpus=job_gpus_exact(
                        gpus=job.gpus, numerator=job.gpu_numerator,
                        denominator=job.gpu_denominator,
                    ),
                    cost_by_month=by_month,
                    pricing=_pricing_of(mixes[pk]),
                    service=job.service,
                    endpoint=job.endpoint,
                )
            )  # fmt: skip
        result[key].sort(key=_sort_key)
    return result


def run_metrics(keys: Iterable[RunKey]) -> dict[RunKey, Metrics]:
    """The metrics of each run that has any (timestamps and checkpoint times in time order,
    as finops.run_metrics.progress orders them). Two queries for any number of runs."""
    keys = list(keys)
    runs = training_runs_matching((k.team_slug, k.run_id) for k in keys)
    if not runs:
        return {}
    points: dict[int, list[tuple[dt.datetime, bool]]] = defaultdict(list)
    rows = (
        RunMetricPoint.objects.filter(run__in={r.pk for r in runs.values()})
        .order_by("run", "timestamp", "source_file", "line")
        .values_list("run_id", "timestamp", "checkpoint")
    )
    for run_pk, timestamp, checkpoint in rows:
        points[run_pk].append((timestamp, checkpoint))
    found: dict[RunKey, Metrics] = {}
    for key in keys:
        run = runs.get((key.team_slug, key.run_id))
        if run is None or not points.get(run.pk):
            continue
        found[key] = Metrics(
            timestamps=[t for t, _ in points[run.pk]],
            checkpoints=[t for t, checkpoint in points[run.pk] if checkpoint],
        )
    return found
