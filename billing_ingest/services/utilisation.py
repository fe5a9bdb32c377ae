"""Import of measured GPU utilisation per job (the input of the `used` charge basis, DESIGN 5.3).

Two formats, each read into the same job id -> utilisation rows, stored the same way:
- csv: a header naming at least `job_id` and `utilisation` (any order, case-insensitive, other
  columns ignored). A utilisation is a fraction 0..1 (`0.5`) or a percentage with `%` (`50%`),
  for example the average of DCGM_FI_PROF_GR_ENGINE_ACTIVE over the job.
- prometheus: dcgm-exporter's DCGM_FI_PROF_GR_ENGINE_ACTIVE (or DCGM_FI_DEV_GPU_UTIL) samples,
  as text exposition scrapes or a query_range JSON export; each job's utilisation is the mean
  of all its samples (parsers/dcgm.py says which labels name the job and why that mean). A Slurm
  label carrying an array task's own id (sacct JobIDRaw) is stored under the job id sacct
  prints for it (`123_4`), looked up in the cluster's job records.

Values are stored with 6 decimals (half-even). Each job's row replaces the one an earlier import
stored for the same (cluster, job id); jobs not in the file keep theirs, and a job with no row
is charged as requested. A file with any bad row stores nothing, and its error names file, row
(line) and column (field, label or JSON path).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from billing_ingest.loading.statistics import tables_analyze_if_changed
from billing_ingest.models import ImportBatch, JobGpuUtilisation, JobRecord
from billing_ingest.parsers.bounds import csv_reader
from billing_ingest.parsers.dcgm import SLURM, JobSamples, read_dcgm_utilisation
from billing_ingest.parsers.values import csv_rows, open_text
from billing_ingest.services.batches import import_batch_create, import_batch_fail
from finops.core.errors import ImportFormatError

JOB_ID = "job_id"
UTILISATION = "utilisation"
_PLACES = Decimal("0.000001")
_HUNDRED = Decimal(100)
_MAX_JOB_ID = JobGpuUtilisation._meta.get_field("job_id").max_length or 320
_PLACES_SCALE = 10**6
# Keeps `IN (...)` lists well under every database's bound-parameter limit.
_IN_CHUNK = 500


@dataclass(frozen=True)
class UtilisationImport:
    batch: ImportBatch
    rows: int
    # True when the same bytes were already imported for this cluster (nothing done).
    duplicate: bool = False
    # prometheus: series of GPUs no job label names (not stored).
    series_without_job: int = 0


@dataclass(frozen=True)
class UtilisationRows:
    """What a reader found: job id -> utilisation (6 places), and what it skipped."""

    values: dict[str, Decimal]
    series_without_job: int = 0


def parse_utilisation(text: str) -> Decimal:
    """A fraction 0..1 or a percentage 0..100 with `%`, as a 6-place Decimal; ValueError if not."""
    raw = text.strip()
    percent = raw.endswith("%")
    number = raw[:-1].strip() if percent else raw
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise ValueError(
            f"{text!r} is not a number (a fraction 0-1 or a percentage like 50%)"
        ) from None
    if not value.is_finite():
        raise ValueError(f"{text!r} is not a finite number")
    if percent:
        value /= _HUNDRED
    if value < 0 or value > 1:
        limit = "0% and 100%" if percent else "0 and 1 (or a percentage with %)"
        raise ValueError(f"{text!r} is not between {limit}")
    return value.quantize(_PLACES, rounding=ROUND_HALF_EVEN)


def read_utilisation_csv(path: Path, *, file_label: str) -> dict[str, Decimal]:
    """job id -> utilisation; raises ImportFormatError naming file, row and column."""
    result: dict[str, Decimal] = {}
    first_row: dict[str, int] = {}
    with open_text(path, compressed=path.suffix == ".gz", file_label=file_label) as handle:
        reader = csv_reader(handle, file_label=file_label)
        try:
            header_cells = next(reader, None)
        except (UnicodeDecodeError, csv.Error, EOFError, OSError) as exc:
            raise ImportFormatError(
                f"has no readable CSV header ({exc})", file=file_label, row=1
            ) from None
        if header_cells is None:
            raise ImportFormatError("is empty (no header)", file=file_label, row=1)
        header = [cell.strip().lower() for cell in header_cells]
        positions: dict[str, int] = {}
        for name in (JOB_ID, UTILISATION):
            if name not in header:
                raise ImportFormatError(
                    f"has no {name} column (header: {', '.join(header_cells)})",
                    file=file_label,
                    row=1,
                    column=name,
                )
            positions[name] = header.index(name)
        rows = csv_rows(reader, file_label=file_label)
        width = max(positions.values()) + 1
        for row_number, cells in rows:
            if len(cells) < width:
                missing = JOB_ID if len(cells) <= positions[JOB_ID] else UTILISATION
                raise ImportFormatError(
                    "has too few cells", file=file_label, row=row_number, column=missing
                )
            job_id = cells[positions[JOB_ID]].strip()
            if not job_id:
                raise ImportFormatError("is empty", file=file_label, row=row_number, column=JOB_ID)
            if len(job_id) > _MAX_JOB_ID:
                raise ImportFormatError(
                    f"is longer than {_MAX_JOB_ID} characters",
                    file=file_label,
                    row=row_number,
                    column=JOB_ID,
                )
            if job_id in result:
                raise ImportFormatError(
                    f"{job_id!r} already appears in row {first_row[job_id]}",
                    file=file_label,
                    row=row_number,
                    column=JOB_ID,
                )
            try:
                value = parse_utilisation(cells[positions[UTILISATION]])
            except ValueError as exc:
                raise ImportFormatError(
                    str(exc), file=file_label, row=row_number, column=UTILISATION
                ) from None
            result[job_id] = value
            first_row[job_id] = row_number
    return result


def rounded_utilisation(value: Fraction) -> Decimal:
    """An exact mean as stored: 6 places, half-even, rounded once (no intermediate decimal)."""
    return Decimal(round(value * _PLACES_SCALE)).scaleb(-6)


def _chunks(values: Iterable[str]) -> Iterable[list[str]]:
    items = sorted(values)
    for start in range(0, len(items), _IN_CHUNK):
        yield items[start : start + _IN_CHUNK]


def slurm_job_ids(*, cluster: str, ids: Iterable[str]) -> dict[str, str]:
    """Slurm job ids as metrics carry them -> JobRecord.job_id of the cluster: an id that is a
    job id maps to itself; else one that is a JobIDRaw (an array task's own id, what
    $SLURM_JOB_ID holds inside it) maps to that record's job id (`123_4`). Ids the job logs do
    not know (yet) are absent: the caller keeps them as they are, so import the jobs first."""
    wanted = set(ids)
    found: dict[str, str] = {}
    for chunk in _chunks(wanted):
        for job_id in JobRecord.objects.filter(cluster=cluster, job_id__in=chunk).values_list(
            "job_id", flat=True
        ):
            found[job_id] = job_id
    for chunk in _chunks(wanted - set(found)):
        rows = (
            JobRecord.objects.filter(cluster=cluster, job_id_raw__in=chunk)
            .order_by("id")
            .values_list("job_id_raw", "job_id")
        )
        for raw, job_id in rows:
            found.setdefault(raw, job_id)
    return found


def read_utilisation_prometheus(path: Path, *, file_label: str, cluster: str) -> UtilisationRows:
    """job id -> mean utilisation of a dcgm-exporter scrape or range export (module docstring)."""
    read = read_dcgm_utilisation(path, file_label=file_label)
    known = slurm_job_ids(cluster=cluster, ids=(v for kind, v in read.jobs if kind == SLURM))
    merged: dict[str, JobSamples] = {}
    for (kind, value), samples in read.jobs.items():
        job_id = known.get(value, value) if kind == SLURM else value
        merged.setdefault(job_id, JobSamples()).merge(samples)
    values = {job_id: rounded_utilisation(s.utilisation()) for job_id, s in sorted(merged.items())}
    return UtilisationRows(values, read.series_without_job)


def _read_csv(path: Path, *, file_label: str, cluster: str) -> UtilisationRows:
    return UtilisationRows(read_utilisation_csv(path, file_label=file_label))


UtilisationReader = Callable[..., UtilisationRows]
READERS: dict[str, UtilisationReader] = {
    "csv": _read_csv,
    "prometheus": read_utilisation_prometheus,
}


def utilisation_import(*, path: Path, cluster: str, format: str = "csv") -> UtilisationImport:
    """Import one file of job utilisations for a cluster, in `format` (module docstring).

    Raises ImportFormatError for a bad file, after recording it on a failed batch; ValueError
    for an unknown format (before any batch exists)."""
    reader = READERS.get(format)
    if reader is None:
        raise ValueError(f"unknown utilisation format {format!r}; known: {', '.join(READERS)}")
    batch = import_batch_create(
        kind=ImportBatch.Kind.UTILISATION, format=format, source=cluster, path=path.resolve()
    )
    if batch.status == ImportBatch.Status.DUPLICATE:
        return UtilisationImport(batch=batch, rows=batch.row_count, duplicate=True)
    try:
        read = reader(path, file_label=str(path), cluster=cluster)
    except ImportFormatError as exc:
        import_batch_fail(batch_id=batch.pk, error=str(exc))
        raise
    values = read.values
    with transaction.atomic():
        job_ids = list(values)
        for start in range(0, len(job_ids), 500):
            JobGpuUtilisation.objects.filter(
                cluster=cluster, job_id__in=job_ids[start : start + 500]
            ).delete()
        JobGpuUtilisation.objects.bulk_create(
            (
                JobGpuUtilisation(cluster=cluster, job_id=job_id, utilisation=value, batch=batch)
                for job_id, value in values.items()
            ),
            batch_size=1000,
        )
        now = timezone.now()
        ImportBatch.objects.filter(pk=batch.pk).update(
            status=ImportBatch.Status.SUCCEEDED, row_count=len(values), started_at=now,
            finished_at=now,
        )  # fmt: skip
    tables_analyze_if_changed([JobGpuUtilisation._meta.db_table])
    batch.refresh_from_db()
    return UtilisationImport(
        batch=batch, rows=len(values), series_without_job=read.series_without_job
    )
