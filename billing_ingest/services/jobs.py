"""Writes for scheduler job logs: clusters and job import batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import transaction
from django.utils import timezone

from billing_ingest.errors import ImportFormatError
from billing_ingest.models import Cluster, ImportBatch, JobRecord
from billing_ingest.parsers.kubernetes import parse_pods
from billing_ingest.parsers.opencost import parse_allocations
from billing_ingest.parsers.rows import JobRow
from billing_ingest.parsers.slurm import DEFAULT_DELIMITER, SacctStats, parse_sacct
from billing_ingest.read_ahead import read_before_writing
from billing_ingest.services.batches import import_batch_claim, import_batch_fail
from billing_ingest.services.job_attempts import slurm_attempts

JobChunks = Iterator[list[JobRow]]
# (path, *, file_label, cluster, stats, columns, delimiter) -> chunks of JobRecord field dicts.
# The cluster (saved, or unsaved defaults when the batch names no stored cluster) carries how to
# read its logs; columns name the columns of a headerless sacct file, delimiter its `--delimiter`.
JobParser = Callable[..., JobChunks]


def _parse_slurm(
    path: Path,
    *,
    file_label: str,
    cluster: Cluster,
    stats: SacctStats,
    columns: Sequence[str] | None = None,
    delimiter: str | None = None,
) -> JobChunks:
    zone = _cluster_zone(cluster)
    return parse_sacct(
        path,
        file_label=file_label,
        time_zone=zone,
        stats=stats,
        columns=columns,
        delimiter=delimiter or DEFAULT_DELIMITER,
    )


def _parse_kubernetes(
    path: Path,
    *,
    file_label: str,
    cluster: Cluster,
    stats: SacctStats,
    columns: Sequence[str] | None = None,
    delimiter: str | None = None,
) -> JobChunks:
    return parse_pods(
        path,
        file_label=file_label,
        gpu_sharing_replicas=cluster.gpu_sharing_replicas,
        stats=stats,
    )


def _parse_opencost(
    path: Path,
    *,
    file_label: str,
    cluster: Cluster,
    stats: SacctStats,
    columns: Sequence[str] | None = None,
    delimiter: str | None = None,
) -> JobChunks:
    return parse_allocations(path, file_label=file_label, stats=stats)


JOB_PARSERS: dict[str, JobParser] = {
    "slurm": _parse_slurm,
    "kubernetes": _parse_kubernetes,
    "opencost": _parse_opencost,
}

# Rows per INSERT round trip: large enough for 300k-job months, small enough for memory.
BULK_SIZE = 5000

# Every column a newer dump may change; the row's id stays, so AllocatedCost.job links survive.
_UPSERT_FIELDS = [
    "batch",
    "job_id_raw",
    "name",
    "account",
    "user",
    "partition",
    "state",
    "start",
    "end",
    "gpus",
    "nodes",
    "run_id",
    "wckey",
    "comment",
    "gpu_numerator",
    "gpu_denominator",
    "namespace",
    "labels",
    "endpoint",
]


def time_zone_resolve(name: str) -> ZoneInfo:
    """An IANA time zone, or ValueError naming the bad value."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (expected an IANA name)") from None


def cluster_get_or_create(
    *, name: str, time_zone: str | None = None, gpu_sharing_replicas: int | None = None
) -> Cluster:
    """The cluster of that name, created with UTC when new; `time_zone` (validated) and
    `gpu_sharing_replicas` (at least 1), when given, replace the stored ones, which every later
    import of this cluster uses."""
    if time_zone is not None:
        time_zone_resolve(time_zone)
    if gpu_sharing_replicas is not None and gpu_sharing_replicas < 1:
        raise ValueError(f"GPU sharing replicas must be at least 1, not {gpu_sharing_replicas}")
    with transaction.atomic():
        cluster, _ = Cluster.objects.get_or_create(name=name)
        changed = []
        if time_zone is not None and cluster.time_zone != time_zone:
            cluster.time_zone = time_zone
            changed.append("time_zone")
        if (
            gpu_sharing_replicas is not None
            and cluster.gpu_sharing_replicas != gpu_sharing_replicas
        ):
            cluster.gpu_sharing_replicas = gpu_sharing_replicas
            changed.append("gpu_sharing_replicas")
        if changed:
            cluster.save(update_fields=changed)
    return cluster


def jobs_batch_ingest(
    *,
    batch_id: int,
    stats: SacctStats | None = None,
    columns: Sequence[str] | None = None,
    delimiter: str | None = None,
) -> ImportBatch:
    """Import one pending jobs batch. A batch another worker claimed, or one already done or a
    duplicate, is returned unchanged.

    All or nothing: a job already stored for the cluster under the same job id (for Slurm, the
    same attempt: the same job id and start) is replaced (a later dump carries the final state of
    a job that was running); other jobs stay. Each attempt of a requeued Slurm job is its own
    record (job_attempts.py). On a format
    error nothing is written and the batch is marked failed with the message. `stats`, when
    given, is filled in with what the parser saw (steps and unstarted jobs skipped).
    `columns` names the columns of a Slurm file without a header (`sacct --noheader`),
    `delimiter` its `sacct --delimiter` (default `|`).
    """
    if not import_batch_claim(batch_id=batch_id):
        return ImportBatch.objects.get(id=batch_id)
    batch = ImportBatch.objects.get(id=batch_id)
    stats = stats if stats is not None else SacctStats()
    try:
        parser = _parser_for(batch.format)
        cluster = Cluster.objects.filter(name=batch.source).first() or Cluster(name=batch.source)
        chunks = parser(
            Path(batch.file_name),
            file_label=batch.file_name,
            cluster=cluster,
            stats=stats,
            columns=columns,
            delimiter=delimiter,
        )
        # On SQLite the file is read before the transaction: no writer waits on the parse.
        chunks = read_before_writing(chunks)
        with transaction.atomic():
            for chunk in chunks:
                _jobs_upsert(batch=batch, rows=chunk, stats=stats)
            row_count = JobRecord.objects.filter(batch_id=batch_id).count()
            ImportBatch.objects.filter(id=batch_id).update(
                status=ImportBatch.Status.SUCCEEDED,
                row_count=row_count,
                error="",
                finished_at=timezone.now(),
            )
    except (ImportFormatError, OSError, ValueError) as exc:
        import_batch_fail(batch_id=batch_id, error=str(exc))
    except Exception as exc:
        # A bug or a time limit: record it so the batch does not sit in `running`, then let the
        # task fail loudly.
        import_batch_fail(batch_id=batch_id, error=f"{type(exc).__name__}: {exc}")
        raise
    batch.refresh_from_db()
    return batch


def _parser_for(format_name: str) -> JobParser:
    try:
        return JOB_PARSERS[format_name]
    except KeyError:
        known = ", ".join(sorted(JOB_PARSERS))
        raise ValueError(f"unsupported jobs format {format_name!r}; supported: {known}") from None


def _cluster_zone(cluster: Cluster) -> tzinfo:
    try:
        return time_zone_resolve(cluster.time_zone or "UTC")
    except ValueError as exc:
        raise ValueError(f"cluster {cluster.name!r}: {exc}") from None


def _jobs_upsert(*, batch: ImportBatch, rows: list[JobRow], stats: SacctStats) -> None:
    if batch.format == "slurm":
        # Every attempt of a requeued job is its own record (job_attempts.py).
        records = slurm_attempts(cluster=batch.source, rows=rows, stats=stats)
    else:
        records = _latest_unfinished_kept(batch=batch, rows=rows)
    JobRecord.objects.bulk_create(
        [JobRecord(batch=batch, cluster=batch.source, **row) for row in records],
        batch_size=BULK_SIZE,
        update_conflicts=True,
        unique_fields=["cluster", "job_id", "attempt"],
        update_fields=_UPSERT_FIELDS,
    )


def _latest_unfinished_kept(*, batch: ImportBatch, rows: list[JobRow]) -> list[JobRow]:
    """Pods and allocations: one record per job id."""
    # One INSERT may not touch a row twice (PostgreSQL ON CONFLICT), so within a chunk the last
    # line for a job id wins, as a later line would when written afterwards.
    latest = {row["job_id"]: row for row in rows}
    # Jobs never un-finish: an older dump or snapshot imported after a newer one still shows a
    # job running, and must not reopen it (its end time would be lost and it would be charged
    # as running to the end of the period).
    running = [job_id for job_id, row in latest.items() if row.get("end") is None]
    if running:
        finished = JobRecord.objects.filter(
            cluster=batch.source, job_id__in=running, end__isnull=False
        ).values_list("job_id", flat=True)
        for job_id in finished:
            del latest[job_id]
    return list(latest.values())
