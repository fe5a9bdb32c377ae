"""`manage.py ingest_energy --format prometheus PATH --cluster NAME`: measured GPU energy per
job attempt from dcgm-exporter metrics (DESIGN section 9; finops/energy/services.py). PATH is a
file or a folder of files, each its own import batch. Import the cluster's jobs first."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.parsers import billing_paths
from finops.energy.services import FORMATS
from finops.energy.tasks import TIME_LIMIT, ingest_energy_file

KWH = 3_600_000


class Command(BaseCommand):
    help = "Import measured GPU energy (DCGM) per job attempt of a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("path", help="a file, or a folder of files")
        parser.add_argument("--cluster", required=True, help="the cluster the jobs ran on")
        parser.add_argument(
            "--timeout", type=float, default=float(TIME_LIMIT), help="seconds to wait for the task"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder")
        cluster = options["cluster"].strip()
        if not cluster:
            raise CommandError("--cluster must name the cluster")
        failed = []
        for file in billing_paths(path):
            task = ingest_energy_file.delay(str(file.resolve()), cluster, options["format"])
            try:
                done = task.get(timeout=options["timeout"])
            except CeleryTimeoutError:
                failed.append(f"{file}: still running")
                continue
            if done["status"] == "failed":
                failed.append(done["error"])
            elif done["status"] == "duplicate":
                self.stdout.write(f"{file}: skipped, {done['error']}")
            else:
                self.stdout.write(_summary(file, done))
        if failed:
            raise CommandError("; ".join(failed))


def _summary(file: Path, done: dict[str, Any]) -> str:
    unknown = done["unknown_jobs"]
    return (
        f"{file}: batch {done['batch_id']} succeeded: {done['rows']} job-node rows, "
        f"{_kwh(done['joules'])} kWh measured GPU energy; "
        f"{_kwh(done['joules_outside_jobs'])} kWh outside any job attempt; "
        f"{done['series_without_job']} GPU series with no job"
        + (f"; jobs not in the job logs: {', '.join(unknown)}" if unknown else "")
    )


def _kwh(joules: str) -> str:
    return f"{Decimal(joules) / KWH:.6f}"
