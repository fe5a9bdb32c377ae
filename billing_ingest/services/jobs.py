"""Writes for scheduler job logs: clusters and job import batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import transaction
from django.utils import timezone

from billing_ingest.loading.read_ahead import read_before_writing
from billing_ingest.loading.statistics import tables_analyze_if_changed
from billing_ingest.models import Cluster, ImportBatch, JobRecord
from billing_ingest.parsers.kubernetes import parse_pods
from billing_ingest.parsers.kubernetes_gpus import GpuSharing
from billing_ingest.parsers.opencost import parse_allocations
from billing_ingest.parsers.rows import END_FROM_SNAPSHOT, JobRow
from billing_ingest.parsers.slurm import DEFAULT_DELIMITER, SacctStats, parse_sacct
from billing_ingest.services.batches import import_batch_claim, import_batch_fail
from billing_ingest.services.job_attempts import slurm_attempts
from finops.core.errors import ImportFormatError

JobChunks = Iterator[list[JobRow]]
# (path, *, file_label, cluster, stats, columns, delimiter, snapshot_time) -> chunks of
# JobRecord field dicts. The cluster (saved, or unsaved defaults when the batch names no
# stored cluster) carries how to read its logs; columns name the columns of a headerless
# sacct file, delimiter its `--delimiter`; snapshot_time is when a Kubernetes API snapshot
# was taken (None for files).
JobParser = Callable[..., JobChunks]


def _parse_slurm(
    path: Path,
    *,
    file_label: str,
    cluster: Cluster,
    stats: SacctStats,
    columns: Sequence[str] | None = None,
    delimiter: str | None = None,
    snapshot_time: datetime | None = None,
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
    snapshot_time: datetime | None = None,
) -> JobChunks:
    return parse_pods(
        path,
        file_label=file_label,
        gpu_sharing_replicas=cluster.gpu_sharing_replicas,
        gpu_sharing_pools=cluster.gpu_sharing_pools or {},
        snapshot_time=snapshot_time,
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
    snapshot_time: datetime | None = None,
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
    "service",
]


def time_zone_resolve(name: str) -> ZoneInfo:
    """An IANA time zone, or ValueError naming the bad value."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (expected an IANA name)") from None


def cluster_get_or_create(
    *,
    name: str,
    time_zone: str | None = None,
    gpu_sharing_replicas: int | None = None,
    gpu_sharing_pools: Mapping[str, int] | None = None,
) -> Cluster:
    """The cluster of that name, created with UTC when new; `time_zone` (validated),
    `gpu_sharing_replicas` (at least 1) and `gpu_sharing_pools` (node-name prefix -> replicas,
    each at least 1: the whole set, replacing the stored one), when given, replace the stored
    ones, which every later import of this cluster uses."""
    if time_zone is not None:
        time_zone_resolve(time_zone)
    if gpu_sharing_replicas is not None and gpu_sharing_replicas < 1:
        raise ValueError(f"GPU sharing replicas must be at least 1, not {gpu_sharing_replicas}")
    pools = None if gpu_sharing_pools is None else dict(sorted(gpu_sharing_pools.items()))
    if pools is not None:
        GpuSharing(pools=pools)  # ValueError naming the pool
        if "" in pools:
            raise ValueError("a GPU sharing node pool needs a node-name prefix")
    updates: dict[str, object] = {
        "time_zone": time_zone,
        "gpu_sharing_replicas": gpu_sharing_replicas,
        "gpu_sharing_pools": pools,
    }
    with transaction.atomic():
        cluster, _ = Cluster.objects.get_or_create(name=name)
        changed = []
        for field_name, value in updates.items():
            if value is not None and getattr(cluster, field_name) != value:
                setattr(cluster, field_name, value)
                changed.append(field_name)
        if changed:
            cluster.save(update_fields=changed)
    return cluster


def jobs_batch_ingest(
    *,
    batch_id: int,
    stats: SacctStats | None = None,
    columns: Sequence[str] | None = None,
    delimiter: str | None = None,
    snapshot_time: datetime | None = None,
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
    `snapshot_time`: when a Kubernetes API snapshot was taken (pods seen in phase Unknown end
    then); the parser's notes (stats.notes) are stored on the batch (ImportBatch.notes).
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
            snapshot_time=snapshot_time,
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
                notes=dict(sorted(stats.notes.items())),
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
    if batch.status == ImportBatch.Status.SUCCEEDED:
        tables_analyze_if_changed([JobRecord._meta.db_table])
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
    _keep_finished(batch, latest)
    _keep_snapshot_ends(batch, latest)
    return list(latest.values())


def _keep_finished(batch: ImportBatch, latest: dict[str, JobRow]) -> None:
    """Jobs never un-finish: an older dump or snapshot imported after a newer one still shows a
    job running, and must not reopen it (its end time would be lost and it would be charged as
    running to the end of the period). Except a pod last seen in phase Unknown (state UNKNOWN,
    ended at that snapshot's time) that a later snapshot sees running again, its node back: the
    same pod (same uid) runs on."""
    running = [job_id for job_id, row in latest.items() if row.get("end") is None]
    if not running:
        return
    finished = JobRecord.objects.filter(
        cluster=batch.source, job_id__in=running, end__isnull=False
    ).values_list("job_id", "state", "job_id_raw")
    for job_id, state, uid in finished:
        if not (state == "UNKNOWN" and uid and uid == latest[job_id].get("job_id_raw")):
            del latest[job_id]


def _keep_snapshot_ends(batch: ImportBatch, latest: dict[str, JobRow]) -> None:
    """A row ended at its snapshot's time (END_FROM_SNAPSHOT) keeps the end already stored for
    the same pod when that is earlier: the first snapshot that saw it over (or last saw it) is
    the nearest to when it ended, and later snapshots of the same pod must not move it on."""
    marked = [job_id for job_id, row in latest.items() if row.pop(END_FROM_SNAPSHOT, False)]
    if not marked:
        return
    stored = JobRecord.objects.filter(
        cluster=batch.source, job_id__in=marked, end__isnull=False
    ).values_list("job_id", "job_id_raw", "end")
    for job_id, uid, end in stored:
        row = latest[job_id]
        start, seen = row.get("start"), row.get("end")
        if end is None or not uid or uid != row.get("job_id_raw"):
            continue
        if (start is None or end >= start) and (seen is None or end < seen):
            row["end"] = end
