"""`manage.py ingest_utilisation --format {csv,prometheus} PATH --cluster NAME`.

Measured GPU utilisation per job, read by attribution on clusters whose charge basis is `used`:
- csv: columns job_id, utilisation (0-1 or a percentage with `%`);
- prometheus: dcgm-exporter's DCGM_FI_PROF_GR_ENGINE_ACTIVE (or DCGM_FI_DEV_GPU_UTIL) as text
  exposition (one or many concatenated scrapes) or a `/api/v1/query_range` JSON export; each
  job's value is the mean of its samples over its GPUs (billing_ingest/parsers/dcgm.py).
Run `attribute --month` afterwards for the months the jobs ran in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.services.utilisation import READERS, utilisation_import
from finops.core.errors import ImportFormatError

SUPPORTED_FORMATS = tuple(READERS)


class Command(BaseCommand):
    help = (
        "Import measured GPU utilisation per job for the `used` charge basis: CSV (job_id, "
        "utilisation as 0-1 or 50%) or dcgm-exporter metrics (Prometheus text or query_range "
        "JSON)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=SUPPORTED_FORMATS)
        parser.add_argument(
            "path",
            help="a CSV file (optionally gzip-compressed), or a Prometheus text or JSON file",
        )
        parser.add_argument("--cluster", required=True, help="the cluster the job ids belong to")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            result = utilisation_import(
                path=path, cluster=options["cluster"], format=options["format"]
            )
        except ImportFormatError as exc:
            raise CommandError(str(exc)) from None
        if result.duplicate:
            self.stdout.write(f"{path}: skipped, {result.batch.error}")
            return
        skipped = ""
        if result.series_without_job:
            skipped = f" ({result.series_without_job} GPU series without a job label skipped)"
        self.stdout.write(
            f"{path}: batch {result.batch.pk} succeeded: {result.rows} job utilisations stored "
            f"for cluster {options['cluster']}{skipped}"
        )
