"""`manage.py ingest_energy --format prometheus PATH --cluster NAME`: measured GPU energy per
job attempt from dcgm-exporter metrics (DESIGN section 9; finops/energy/services.py). PATH is a
file or a folder of files, each its own import batch. Import the cluster's jobs first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.errors import ImportFormatError
from billing_ingest.parsers import billing_paths
from finops.energy.services import FORMATS, energy_import

KWH = 3_600_000


class Command(BaseCommand):
    help = "Import measured GPU energy (DCGM) per job attempt of a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("path", help="a file, or a folder of files")
        parser.add_argument("--cluster", required=True, help="the cluster the jobs ran on")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder")
        cluster = options["cluster"].strip()
        if not cluster:
            raise CommandError("--cluster must name the cluster")
        for file in billing_paths(path):
            try:
                done = energy_import(path=file, cluster=cluster, format=options["format"])
            except ImportFormatError as exc:
                raise CommandError(str(exc)) from None
            if done.duplicate:
                self.stdout.write(f"{file}: skipped, {done.batch.error}")
                continue
            self.stdout.write(
                f"{file}: batch {done.batch.pk} succeeded: {done.rows} job-node rows, "
                f"{done.joules / KWH:.6f} kWh measured GPU energy; "
                f"{done.joules_outside_jobs / KWH:.6f} kWh outside any job attempt; "
                f"{done.series_without_job} GPU series with no job"
                + (f"; jobs not in the job logs: {', '.join(done.unknown_jobs)}"
                   if done.unknown_jobs else "")
            )  # fmt: skip
