"""`manage.py ingest_utilisation --format csv PATH --cluster NAME`.

Measured GPU utilisation per job (columns job_id, utilisation: 0-1 or a percentage with `%`),
read by attribution on clusters whose charge basis is `used`. Run `attribute --month` afterwards
for the months the jobs ran in. Prometheus input is not supported yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.errors import ImportFormatError
from billing_ingest.services.utilisation import utilisation_import

SUPPORTED_FORMATS = ("csv",)


class Command(BaseCommand):
    help = (
        "Import measured GPU utilisation per job (CSV: job_id, utilisation as 0-1 or 50%) "
        "for the `used` charge basis."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=SUPPORTED_FORMATS)
        parser.add_argument("path", help="a CSV file (optionally gzip-compressed)")
        parser.add_argument("--cluster", required=True, help="the cluster the job ids belong to")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            result = utilisation_import(path=path, cluster=options["cluster"])
        except ImportFormatError as exc:
            raise CommandError(str(exc)) from None
        if result.duplicate:
            self.stdout.write(f"{path}: skipped, {result.batch.error}")
            return
        self.stdout.write(
            f"{path}: batch {result.batch.pk} succeeded: {result.rows} job utilisations stored "
            f"for cluster {options['cluster']}"
        )
