"""Import of measured GPU energy per job attempt (`ingest_energy`, DESIGN section 9).

The join, like utilisation's (billing_ingest/services/utilisation.py) plus time and node:
1. a series' job labels name the job (a Slurm array task's own id becomes `123_4`);
2. each interval between two samples goes to the job's attempts (JobRecord rows of the cluster
   with that job id) whose node list holds the series' node and whose [start, end) overlaps it,
   pro rata to the overlap (energy spread evenly over the interval); a requeued job's attempts
   on other nodes or at other times get none of it. Energy outside every attempt is counted.
3. shared GPUs are split like cost: an attempt holding g GPUs per node whose series show n GPUs
   on that node gets min(1, g / n) of each GPU's energy (a 1/7 MIG slice: 1/7 of the GPU; the
   GPU's other holders get their own fractions; what nobody held is idle).
Jobs must be imported first (ingest_jobs): a job id the cluster does not know is skipped and
counted. A file imported again replaces the rows of the jobs it measures.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from billing_ingest.loading.statistics import tables_analyze_if_changed
from billing_ingest.models import ImportBatch, JobRecord
from billing_ingest.parsers.dcgm import SLURM
from billing_ingest.services.batches import import_batch_create, import_batch_fail
from billing_ingest.services.utilisation import slurm_job_ids
from finops.attribution.models import AllocatedCost
from finops.core.errors import ImportFormatError
from finops.core.money import EXACT
from finops.core.months import month_format
from finops.core.pipeline_wake import economics_refresh_send
from finops.energy.dcgm_energy import GpuSeries, read_dcgm_energy
from finops.energy.models import JobEnergy

JOULE_PLACES = Decimal("0.000001")
FORMATS = ("prometheus",)


@dataclass(frozen=True, slots=True)
class EnergyImport:
    batch: ImportBatch
    rows: int
    duplicate: bool = False
    joules: Decimal = Decimal(0)
    # Energy of job series that fell outside every attempt's window on its node.
    joules_outside_jobs: Decimal = Decimal(0)
    series_without_job: int = 0
    unknown_jobs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Attempt:
    job_id: str
    attempt: int
    start_ms: int
    end_ms: int | None
    nodes: tuple[str, ...]
    gpus_per_node: Fraction


def _ms(value: datetime) -> int:
    return int(value.astimezone(UTC).timestamp() * 1000)


def _attempts(cluster: str, job_ids: set[str]) -> dict[str, list[_Attempt]]:
    found: dict[str, list[_Attempt]] = defaultdict(list)
    ids = sorted(job_ids)
    for start in range(0, len(ids), 500):
        for job in JobRecord.objects.filter(
            cluster=cluster, job_id__in=ids[start : start + 500], start__isnull=False
        ).order_by("job_id", "attempt"):
            assert job.start is not None
            nodes = tuple(str(n) for n in job.nodes or [])
            per_node = job.exact_gpus() / max(len(nodes), 1)
            found[job.job_id].append(
                _Attempt(
                    job.job_id, job.attempt, _ms(job.start),
                    _ms(job.end) if job.end else None, nodes, per_node,
                )
            )  # fmt: skip
    return found


def _overlap(a0: int, a1: int, b0: int, b1: int | None) -> int:
    end = a1 if b1 is None else min(a1, b1)
    return max(0, end - max(a0, b0))


def _job_ids(cluster: str, gpus: list[GpuSeries]) -> dict[GpuSeries, str]:
    known = slurm_job_ids(cluster=cluster, ids={s.job[1] for s in gpus if s.job[0] == SLURM})
    return {s: (known.get(s.job[1], s.job[1]) if s.job[0] == SLURM else s.job[1]) for s in gpus}


def energy_import(*, path: Path, cluster: str, format: str = "prometheus") -> EnergyImport:
    """Import one file of DCGM energy for a cluster (module docstring). Raises
    ImportFormatError for a bad file after recording it on a failed batch."""
    if format not in FORMATS:
        raise ValueError(f"unknown energy format {format!r}; known: {', '.join(FORMATS)}")
    batch = import_batch_create(
        kind=ImportBatch.Kind.ENERGY, format=format, source=cluster, path=path.resolve()
    )
    if batch.status == ImportBatch.Status.DUPLICATE:
        return EnergyImport(batch=batch, rows=batch.row_count, duplicate=True)
    try:
        read = read_dcgm_energy(path, file_label=str(path))
    except ImportFormatError as exc:
        import_batch_fail(batch_id=batch.pk, error=str(exc))
        raise
    series = list(read.gpus.values())
    job_of = _job_ids(cluster, series)
    attempts = _attempts(cluster, set(job_of.values()))
    # GPUs each attempt's series show per node (the n of the module docstring).
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in series:
        seen[(job_of[s], s.node)].add(s.gpu)
    totals: dict[tuple[str, int, str], Fraction] = defaultdict(Fraction)
    methods: dict[tuple[str, int, str], set[str]] = defaultdict(set)
    outside = Fraction(0)
    unknown: set[str] = set()
    for s in series:
        job_id = job_of[s]
        candidates = [a for a in attempts.get(job_id, []) if not a.nodes or s.node in a.nodes]
        if not attempts.get(job_id):
            unknown.add(job_id)
        shown = len(seen[(job_id, s.node)])
        for interval in s.intervals():
            length = interval.end_ms - interval.start_ms
            energy = Fraction(interval.joules)
            placed = Fraction(0)
            for a in candidates:
                part = _overlap(interval.start_ms, interval.end_ms, a.start_ms, a.end_ms)
                if not part:
                    continue
                share = min(Fraction(1), a.gpus_per_node / shown)
                in_window = energy * part / length
                placed += in_window
                key = (job_id, a.attempt, s.node)
                totals[key] += in_window * share
                methods[key].add(s.method)
            outside += energy - placed
    rows = [
        JobEnergy(
            batch=batch, cluster=cluster, job_id=job_id, attempt=attempt, node=node,
            joules=_joules(value),
            method=(next(iter(methods[(job_id, attempt, node)]))
                    if len(methods[(job_id, attempt, node)]) == 1 else JobEnergy.Method.MIXED),
            gpus_measured=len(seen[(job_id, node)]),
        )
        for (job_id, attempt, node), value in sorted(totals.items())
    ]  # fmt: skip
    with transaction.atomic():
        measured = sorted({r.job_id for r in rows})
        for start in range(0, len(measured), 500):
            JobEnergy.objects.filter(
                cluster=cluster, job_id__in=measured[start : start + 500]
            ).delete()
        JobEnergy.objects.bulk_create(rows, batch_size=1000)
        now = timezone.now()
        ImportBatch.objects.filter(pk=batch.pk).update(
            status=ImportBatch.Status.SUCCEEDED, row_count=len(rows), started_at=now,
            finished_at=now,
        )  # fmt: skip
    # Planner statistics before the economics refresh reads the rows (PostgreSQL).
    tables_analyze_if_changed([JobEnergy._meta.db_table])
    batch.refresh_from_db()
    economics_refresh_send(_ledger_months(cluster, sorted({r.job_id for r in rows})))
    return EnergyImport(
        batch=batch,
        rows=len(rows),
        joules=sum((r.joules for r in rows), Decimal(0)),
        joules_outside_jobs=_joules(outside),
        series_without_job=read.series_without_job,
        unknown_jobs=tuple(sorted(unknown)),
    )


def _ledger_months(cluster: str, job_ids: list[str]) -> list[str]:
    """The billing months ("YYYY-MM") the ledger charged these jobs in."""
    months: set[str] = set()
    for start in range(0, len(job_ids), 500):
        periods = (
            AllocatedCost.objects.filter(
                job__cluster=cluster, job__job_id__in=job_ids[start : start + 500]
            )
            .order_by()
            .values_list("billing_period", flat=True)
            .distinct()
        )
        months |= {month_format(p) for p in periods}
    return sorted(months)


def _joules(value: Fraction) -> Decimal:
    exact = EXACT.divide(Decimal(value.numerator), Decimal(value.denominator))
    return exact.quantize(JOULE_PLACES, context=EXACT)
