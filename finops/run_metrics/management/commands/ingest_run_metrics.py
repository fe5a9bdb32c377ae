"""`manage.py ingest_run_metrics --format FMT PATH`: training-run progress (DESIGN section 9).

csv: the generic format (run_id, team, timestamp, step, tokens, samples, checkpoint,
model_params, flops_per_token, dtype); mlflow names its run (a `finops.run` tag, else the run's
name). The log formats (torchtitan, megatron, lightning) and tensorboard event files do not:
give --run-id (and --team where run ids repeat across teams) and the constants they do not
print. PATH is a file or a folder; each file is its own import batch, run by its own Celery task
(lightning: each metrics.csv, read with the hparams.yaml and checkpoints beside it; mlflow: each
run.json, with the REST history pages beside it; tensorboard: each events.out.tfevents file).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.models import ImportBatch
from billing_ingest.parsers import billing_paths
from finops.run_metrics.parsers import RUN_METRICS_PARSERS, metrics_files
from finops.run_metrics.parsers.common import BadField, RunOptions, dtype_of, timestamp_of
from finops.run_metrics.services import FILE_NAMED_FORMATS, metrics_batch_create
from finops.run_metrics.tasks import TIME_LIMIT, ingest_run_metrics_batch


def _positive(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError(value)
    return number


def _time(value: str) -> datetime:
    try:
        return timestamp_of(value)
    except BadField as exc:
        raise ValueError(str(exc)) from None


class Command(BaseCommand):
    help = "Import training-run metrics (steps, tokens, samples, checkpoints) of runs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=sorted(RUN_METRICS_PARSERS))
        parser.add_argument("path", help="a file, or a folder of files read together")
        parser.add_argument("--run-id", default="", help="the run (formats that do not name it)")
        parser.add_argument("--team", default="", help="team slug, where run ids repeat")
        parser.add_argument("--model-params", type=_positive, help="parameters of the model")
        parser.add_argument(
            "--flops-per-token", type=_positive, help="default: 6 x model parameters"
        )
        parser.add_argument("--dtype", default="", help="bf16 (default), fp16, fp8, tf32, fp32")
        parser.add_argument(
            "--seq-length", type=_positive, help="tokens per sample (Megatron: else from the log)"
        )
        parser.add_argument(
            "--global-batch-size",
            type=_positive,
            help="samples per step (torchtitan: else from the log)",
        )
        parser.add_argument(
            "--started-at",
            type=_time,
            help="ISO 8601 start of the attempt (lightning: its `time` counts from it)",
        )
        parser.add_argument(
            "--timeout", type=float, default=float(TIME_LIMIT), help="seconds to wait for the task"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder")
        try:
            dtype = dtype_of(options["dtype"])
        except BadField as exc:
            raise CommandError(f"--dtype: {exc}") from None
        run = RunOptions(
            run_id=options["run_id"].strip(),
            team=options["team"].strip().lower(),
            model_params=options["model_params"],
            flops_per_token=options["flops_per_token"],
            dtype=dtype,
            seq_length=options["seq_length"],
            global_batch_size=options["global_batch_size"],
            started_at=options["started_at"],
        )
        if options["format"] not in FILE_NAMED_FORMATS and not run.run_id:
            raise CommandError(f"--format {options['format']} needs --run-id: its log names no run")
        # One import batch and one task per file: a folder of logs (one per attempt) is several
        # imports, each replaced on its own when its file is imported again.
        failed = [
            message
            for file in metrics_files(options["format"], billing_paths(path))
            if (message := self._ingest(file, options["format"], run, options["timeout"]))
        ]
        if failed:
            raise CommandError("; ".join(failed))

    def _ingest(self, path: Path, format: str, run: RunOptions, timeout: float) -> str:
        """Import one file; the error, or "" when it succeeded (or was already imported)."""
        batch = metrics_batch_create(format=format, path=path, options=run)
        if batch.status == ImportBatch.Status.DUPLICATE:
            self.stdout.write(f"{path}: skipped, {batch.error}")
            return ""
        try:
            summary = ingest_run_metrics_batch.delay(batch.pk).get(timeout=timeout)
        except CeleryTimeoutError:
            return f"{path}: batch {batch.pk} still running"
        if summary["status"] != ImportBatch.Status.SUCCEEDED:
            return f"{path}: batch {batch.pk} {summary['status']}: {summary['error']}"
        self.stdout.write(
            f"{path}: batch {batch.pk} succeeded: {summary['row_count']} metric rows stored"
        )
        return ""
