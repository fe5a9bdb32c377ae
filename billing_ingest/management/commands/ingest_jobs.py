"""`manage.py ingest_jobs --format {slurm,kubernetes,opencost} PATH [--cluster NAME]
[--time-zone TZ] [--gpu-sharing-replicas N] [--gpu-sharing-pool PREFIX=N ...]`.

slurm: `sacct --parsable2` or `--parsable` output with its header (or `--columns JobID,...`
naming the columns of `sacct --noheader` output; `--delimiter` when sacct was given one); with
preemption, export with `sacct --duplicates` (`-D`) so that every attempt of a requeued job is
charged; kubernetes: `kubectl get pods -A -o json` (or `-o yaml`);
opencost: an OpenCost `/allocation` response (aggregate=pod).

One import batch per file, each run by the Celery task (eagerly in-process without a broker,
on a worker with one; a worker must see the same file system path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.management.notes import note_lines
from billing_ingest.management.pipeline import request_pipeline
from billing_ingest.models import Cluster, ImportBatch, MonthChange
from billing_ingest.parsers import billing_paths
from billing_ingest.services.batches import import_batch_create
from billing_ingest.services.jobs import cluster_get_or_create
from billing_ingest.services.months import job_months_touched
from billing_ingest.tasks.jobs import TIME_LIMIT, ingest_jobs_batch
from finops.core.wording import counted

SUPPORTED_FORMATS = ("slurm", "kubernetes", "opencost")
# What each format's parse statistics count, for the per-file summary line.
_READ = {"slurm": "rows", "kubernetes": "pods", "opencost": "allocations"}


class Command(BaseCommand):
    help = (
        "Import scheduler job logs: Slurm `sacct --parsable2` output with its header, a "
        "Kubernetes pod list (`kubectl get pods -A -o json` or `-o yaml`) or an OpenCost "
        "/allocation response."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=SUPPORTED_FORMATS)
        parser.add_argument("path", help="a file, or a folder of files")
        parser.add_argument("--cluster", default="default", help="cluster name (default: default)")
        parser.add_argument(
            "--time-zone",
            dest="time_zone",
            default=None,
            help="IANA time zone of sacct's times; stored on the cluster for later imports",
        )
        parser.add_argument(
            "--gpu-sharing-replicas",
            dest="gpu_sharing_replicas",
            type=int,
            default=None,
            help="Kubernetes time-slicing: replicas per GPU (one `nvidia.com/gpu`, or "
            "`nvidia.com/gpu.shared` with renameByDefault, is 1/N of a GPU) on every node "
            "without a --gpu-sharing-pool; stored on the cluster for later imports",
        )
        parser.add_argument(
            "--gpu-sharing-pool",
            dest="gpu_sharing_pools",
            action="append",
            default=None,
            metavar="PREFIX=N",
            help="Kubernetes time-slicing per node pool: nodes whose name starts with PREFIX "
            "share each GPU N ways (N=1: whole GPUs); repeat for each pool. Given, the pools "
            "replace the cluster's stored ones",
        )
        parser.add_argument(
            "--columns",
            default=None,
            help="slurm only: comma-separated column names of a file without a header line "
            "(`sacct --noheader --parsable2 --format=...`), in the file's order",
        )
        parser.add_argument(
            "--delimiter",
            default=None,
            help="slurm only: the field delimiter given to `sacct --delimiter` (default: |)",
        )
        parser.add_argument(
            "--no-attribute",
            action="store_true",
            help="do not re-attribute the billing months the new jobs overlap (default: do)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=float(TIME_LIMIT),
            help="seconds to wait for each file's task",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        root = Path(options["path"])
        if not root.exists():
            raise CommandError(f"{root}: no such file or folder")
        columns = self._columns(options["columns"], options["format"])
        delimiter = self._delimiter(options["delimiter"], options["format"])
        pools = self._pools(options["gpu_sharing_pools"])
        paths = billing_paths(root)
        if not paths:
            raise CommandError(f"{root}: no files to import")
        try:
            cluster = cluster_get_or_create(
                name=options["cluster"],
                time_zone=options["time_zone"],
                gpu_sharing_replicas=options["gpu_sharing_replicas"],
                gpu_sharing_pools=pools,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["format"] == "slurm":
            self.stdout.write(f"cluster {cluster.name} (times read as {cluster.time_zone})")
        else:
            pool_text = "".join(
                f", node pool {prefix}*: {n}"
                for prefix, n in sorted((cluster.gpu_sharing_pools or {}).items())
            )
            self.stdout.write(
                f"cluster {cluster.name} (GPU sharing replicas {cluster.gpu_sharing_replicas}"
                f"{pool_text})"
            )
        batch_ids: list[int] = []
        failed = [
            path
            for path in paths
            if not self._ingest_file(
                path,
                cluster,
                options["format"],
                options["timeout"],
                batch_ids,
                (columns, delimiter),
            )
        ]
        if not options["no_attribute"]:
            months = job_months_touched(batch_ids=batch_ids)
            request_pipeline(self, months=months, kind=MonthChange.Kind.JOBS)
        if failed:
            raise CommandError(f"{len(failed)} of {counted(len(paths), 'file')} failed")

    @staticmethod
    def _columns(text: str | None, fmt: str) -> list[str] | None:
        if text is None:
            return None
        if fmt != "slurm":
            raise CommandError("--columns applies to --format slurm only")
        columns = [name.strip() for name in text.split(",")]
        if not all(columns):
            raise CommandError(f"--columns {text!r}: empty column name")
        return columns

    @staticmethod
    def _delimiter(text: str | None, fmt: str) -> str | None:
        if text is None:
            return None
        if fmt != "slurm":
            raise CommandError("--delimiter applies to --format slurm only")
        text = {"\\t": "\t", "tab": "\t"}.get(text, text)
        if not text or text.strip(" ") != text:
            raise CommandError(f"--delimiter {text!r}: empty, or spaces around it")
        return text

    @staticmethod
    def _pools(values: list[str] | None) -> dict[str, int] | None:
        if values is None:
            return None
        pools: dict[str, int] = {}
        for value in values:
            prefix, sep, count = value.rpartition("=")
            if not sep or not prefix.strip() or not count.strip().isdigit():
                raise CommandError(
                    f"--gpu-sharing-pool {value!r}: expected PREFIX=N (a node-name prefix and "
                    "the replicas per GPU, e.g. gke-t4-pool=4)"
                )
            pools[prefix.strip()] = int(count)
        return pools

    def _ingest_file(
        self,
        path: Path,
        cluster: Cluster,
        fmt: str,
        timeout: float,
        batch_ids: list[int],
        layout: tuple[list[str] | None, str | None],
    ) -> bool:
        batch = import_batch_create(
            kind=ImportBatch.Kind.JOBS, format=fmt, source=cluster.name, path=path.resolve()
        )
        batch_ids.append(batch.pk)
        if batch.status == ImportBatch.Status.DUPLICATE:
            self.stdout.write(f"{path}: skipped, {batch.error}")
            return True
        try:
            columns, delimiter = layout
            summary = ingest_jobs_batch.delay(batch.pk, columns, delimiter).get(timeout=timeout)
        except CeleryTimeoutError:
            self.stderr.write(f"{path}: batch {batch.pk} still running after {timeout:g}s")
            return False
        batch.refresh_from_db()
        if batch.status != ImportBatch.Status.SUCCEEDED:
            self.stderr.write(f"{path}: batch {batch.pk} {batch.status}: {batch.error}")
            return False
        self.stdout.write(f"{path}: batch {batch.pk} succeeded: {self._summary(fmt, summary)}")
        for line in note_lines(batch.notes or {}, unit="pod" if fmt == "kubernetes" else "job"):
            self.stdout.write(f"{path}: {line}")
        return True

    @staticmethod
    def _summary(fmt: str, summary: dict[str, Any]) -> str:
        read = f"{summary['data_rows']} {_READ[fmt]} read"
        stored = f"{summary['row_count']} jobs stored"
        skipped = summary["skipped_not_started"]
        if fmt == "kubernetes":
            return f"{read}, {stored}, {skipped} unscheduled or not-started pods skipped, 0 errors"
        if fmt == "opencost":
            return f"{read}, {stored}, {skipped} without pod, node or GPU hours skipped, 0 errors"
        attempts = ""
        if summary.get("requeued_attempts"):
            attempts += (
                f", {counted(summary['requeued_attempts'], 'later attempt')} of requeued "
                "jobs, each its own job"
            )
        if summary.get("superseded_open_attempts"):
            attempts += (
                f", {counted(summary['superseded_open_attempts'], 'open attempt')} of "
                "requeued jobs ended at their next attempt's start (an estimate: export with "
                "`sacct -D` for their real end)"
            )
        return (
            f"{read}, {stored}, {summary['skipped_steps']} job steps skipped, "
            f"{skipped} not-started jobs skipped, {summary['finished_without_end']} finished "
            f"jobs without End ended at Start + Elapsed{attempts}, 0 errors"
        )
