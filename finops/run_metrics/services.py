"""Writes for run metrics: an import batch per file (or folder), parsed whole, then written in
one transaction. A failed import writes nothing and keeps what earlier imports brought."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from billing_ingest.loading.statistics import tables_analyze_if_changed
from billing_ingest.models import ImportBatch
from billing_ingest.parsers import billing_paths
from billing_ingest.services.batches import (
    file_sha256,
    import_batch_claim,
    import_batch_fail,
    import_batch_record,
)
from finops.core.errors import ImportFormatError
from finops.core.months import month_format
from finops.core.pipeline_wake import economics_refresh_send
from finops.core.queue import task_send
from finops.org.models import Team
from finops.org.services import data_version_bump
from finops.run_metrics.models import (
    RUN_METRICS_BATCH_KIND,
    RunMetricPoint,
    RunMetricsImport,
    RunPlan,
    TrainingRun,
)
from finops.run_metrics.parsers import metrics_parser
from finops.run_metrics.parsers.common import ParsedFile, RunConstants, RunOptions
from finops.run_metrics.plan_inputs import PlannedRun

BULK_SIZE = 5000
# ImportBatch.source of imports whose files name their runs (the generic CSV).
FILE_NAMED_SOURCE = "run-metrics"


def files_sha256(paths: Iterable[Path], root: Path) -> str:
    """One digest over every file's name (relative to root) and content: a folder is one
    import, and the same folder imported again is a duplicate."""
    digest = hashlib.sha256()
    for path in paths:
        name = path.name if path == root else str(path.relative_to(root))
        digest.update(f"{name}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


def metrics_batch_create(*, format: str, path: Path, options: RunOptions) -> ImportBatch:
    """Record an import of a file or folder. The same bytes already imported for the same run
    (or, for files that name their runs, by any import) give a DUPLICATE batch that never runs."""
    metrics_parser(format)  # unknown formats fail here, before a batch exists
    root = path.resolve()
    sha = files_sha256(billing_paths(root), root)
    source = f"{options.team or '*'}/{options.run_id}" if options.run_id else FILE_NAMED_SOURCE
    with transaction.atomic():
        batch = import_batch_record(
            kind=RUN_METRICS_BATCH_KIND, format=format, source=source, file_name=str(root),
            sha=sha,
        )  # fmt: skip
        RunMetricsImport.objects.create(
            batch=batch,
            run_id=options.run_id,
            team_slug=options.team,
            model_params=options.model_params,
            flops_per_token=options.flops_per_token,
            dtype=options.dtype,
            seq_length=options.seq_length,
            global_batch_size=options.global_batch_size,
            started_at=options.started_at,
        )
    return batch


def _options(batch: ImportBatch) -> RunOptions:
    stored = RunMetricsImport.objects.filter(batch=batch).first()
    if stored is None:
        return RunOptions()
    return RunOptions(
        run_id=stored.run_id,
        team=stored.team_slug,
        model_params=stored.model_params,
        flops_per_token=stored.flops_per_token,
        dtype=stored.dtype,
        seq_length=stored.seq_length,
        global_batch_size=stored.global_batch_size,
        started_at=stored.started_at,
    )


def metrics_batch_ingest(*, batch_id: int) -> ImportBatch:
    """Import one pending run-metrics batch: parse every file, then write in one transaction.

    Each file's points replace the points an earlier import of the same file brought (of any
    run); points of other files stay (another attempt's log). On a format error nothing is
    written and the batch is FAILED with the message naming file, row and column."""
    if not import_batch_claim(batch_id=batch_id):
        return ImportBatch.objects.get(id=batch_id)
    batch = ImportBatch.objects.get(id=batch_id)
    run_ids: list[str] = []
    try:
        root = Path(batch.file_name)
        parse = metrics_parser(batch.format)
        options = _options(batch)
        files = {str(path): parse(path, options, str(path)) for path in billing_paths(root)}
        run_ids = sorted({row.run_id for parsed in files.values() for row in parsed.rows})
        with transaction.atomic():
            rows = sum(_file_write(batch, name, parsed) for name, parsed in files.items())
            TrainingRun.objects.filter(points__isnull=True).delete()
            months = sorted({month_format(row.timestamp) for p in files.values() for row in p.rows})
            ImportBatch.objects.filter(id=batch_id).update(
                status=ImportBatch.Status.SUCCEEDED,
                row_count=rows,
                billing_periods=months,
                error="",
                finished_at=timezone.now(),
            )
            data_version_bump()  # the runs' efficiency in cached API answers is stale
    except (ImportFormatError, OSError, ValueError) as exc:
        import_batch_fail(batch_id=batch_id, error=str(exc))
    except Exception as exc:
        import_batch_fail(batch_id=batch_id, error=f"{type(exc).__name__}: {exc}")
        raise
    batch.refresh_from_db()
    if batch.status == ImportBatch.Status.SUCCEEDED:
        # Planner statistics before the economics refresh reads the points (PostgreSQL).
        tables_analyze_if_changed([RunMetricPoint._meta.db_table, TrainingRun._meta.db_table])
        # Only the runs the files name: a month's other runs did not change.
        economics_refresh_send(list(batch.billing_periods or []), run_ids=run_ids)
    return batch


def _file_write(batch: ImportBatch, source_file: str, parsed: ParsedFile) -> int:
    """Replace one file's points; upsert the runs it names with their constants."""
    RunMetricPoint.objects.filter(source_file=source_file).delete()
    runs = {key: _run_upsert(batch, key, constants) for key, constants in parsed.constants.items()}
    RunMetricPoint.objects.bulk_create(
        [
            RunMetricPoint(
                run=runs[(row.team, row.run_id)],
                batch=batch,
                source_file=source_file,
                line=row.line,
                timestamp=row.timestamp,
                step=row.step,
                tokens=row.tokens,
                samples=row.samples,
                checkpoint=row.checkpoint,
            )
            for row in parsed.rows
        ],
        batch_size=BULK_SIZE,
    )
    return len(parsed.rows)


def _run_upsert(batch: ImportBatch, key: tuple[str, str], constants: RunConstants) -> TrainingRun:
    team, run_id = key
    run, _ = TrainingRun.objects.get_or_create(team_slug=team, run_id=run_id)
    run.model_params = constants.model_params or run.model_params
    run.flops_per_token = constants.flops_per_token or run.flops_per_token
    run.dtype = constants.dtype or run.dtype
    run.batch = batch
    run.save()
    return run


def run_plan_save(
    *,
    team: Team,
    run_id: str,
    plan: PlannedRun,
    created_by: str,
    pricing: str = "",
    instance_type: str = "",
) -> RunPlan:
    """Keep a plan for a run: its hours and MFU, and the cost of the chosen way of buying (the
    cheapest option of `pricing`, e.g. "on_demand", on `instance_type` where named; default
    the cheapest option of all)."""
    chosen = next(
        (
            o
            for o in plan.estimate.options
            if (not pricing or o.pricing == pricing)
            and (not instance_type or o.instance_type.lower() == instance_type.lower())
        ),
        None,
    )
    if chosen is None:
        wanted = " on ".join(x for x in (pricing, instance_type) if x) or "any"
        raise ValueError(f"no priced option {wanted} in the plan")
    return RunPlan.objects.create(
        team=team,
        run_id=run_id,
        created_by=created_by,
        model_params=plan.request.model_params,
        tokens=plan.request.tokens,
        flops_per_token=plan.request.flops_per_token,
        gpu_model=plan.request.gpu_model,
        gpu_count=plan.request.gpu_count,
        dtype=plan.dtype,
        mfu=plan.request.mfu,
        mfu_basis=plan.mfu_basis[:200],
        gpu_hours=plan.estimate.gpu_hours,
        wall_hours=plan.estimate.wall_hours,
        provider=chosen.provider,
        instance_type=chosen.instance_type,
        pricing=chosen.pricing,
        cost=chosen.cost,
        currency=chosen.currency,
    )


INGEST_TASK = "finops.run_metrics.tasks.ingest_run_metrics_batch"
# Formats a single uploaded file can carry (Lightning's is a folder: metrics.csv + hparams.yaml).
UPLOAD_FORMATS = ("csv", "mlflow", "megatron", "tensorboard", "torchtitan")
# Formats whose files name their run; the others need the run id.
FILE_NAMED_FORMATS = ("csv", "mlflow")


def upload_metrics_ingest(*, path: Path, format: str, options: RunOptions) -> ImportBatch:
    """An uploaded run-metrics file as `ingest_run_metrics` imports it: one batch (committed by
    metrics_batch_create), then its task (the Imports page polls its progress)."""
    if format not in UPLOAD_FORMATS:
        raise ValueError(f"unknown run-metrics upload format {format!r}")
    if format not in FILE_NAMED_FORMATS and not options.run_id:
        raise ValueError(f"a {format} file names no run: give the run id")
    batch = metrics_batch_create(format=format, path=path, options=options)
    if batch.status != ImportBatch.Status.DUPLICATE:
        task_send(INGEST_TASK, batch.pk)
    return batch
