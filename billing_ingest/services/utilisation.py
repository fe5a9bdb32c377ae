"""Import of measured GPU utilisation per job (the input of the `used` charge basis, DESIGN 5.3).

CSV with a header naming at least `job_id` and `utilisation` (any order, case-insensitive, other
columns ignored). A utilisation is a fraction 0..1 (`0.5`) or a percentage with `%` (`50%`),
for example the average of DCGM_FI_PROF_GR_ENGINE_ACTIVE over the job; it is stored with 6
decimals (half-even). Each job's row replaces the one an earlier import stored for the same
(cluster, job id); jobs not in the file keep theirs. A file with any bad row stores nothing, and
its error names file, row and column.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from billing_ingest.errors import ImportFormatError
from billing_ingest.models import ImportBatch, JobGpuUtilisation
from billing_ingest.parsers.values import csv_rows, open_text
from billing_ingest.services.batches import import_batch_create, import_batch_fail

JOB_ID = "job_id"
UTILISATION = "utilisation"
_PLACES = Decimal("0.000001")
_HUNDRED = Decimal(100)
_MAX_JOB_ID = JobGpuUtilisation._meta.get_field("job_id").max_length or 320


@dataclass(frozen=True)
class UtilisationImport:
    batch: ImportBatch
    rows: int
    # True when the same bytes were already imported for this cluster (nothing done).
    duplicate: bool = False


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
    with open_text(path, compressed=path.suffix == ".gz") as handle:
        reader = csv.reader(handle)
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


def utilisation_import(*, path: Path, cluster: str) -> UtilisationImport:
    """Import one CSV file of job utilisations for a cluster (module docstring).

    Raises ImportFormatError for a bad file, after recording it on a failed batch."""
    batch = import_batch_create(
        kind=ImportBatch.Kind.UTILISATION, format="csv", source=cluster, path=path.resolve()
    )
    if batch.status == ImportBatch.Status.DUPLICATE:
        return UtilisationImport(batch=batch, rows=batch.row_count, duplicate=True)
    try:
        values = read_utilisation_csv(path, file_label=str(path))
    except ImportFormatError as exc:
        import_batch_fail(batch_id=batch.pk, error=str(exc))
        raise
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
    batch.refresh_from_db()
    return UtilisationImport(batch=batch, rows=len(values))
