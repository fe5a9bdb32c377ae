"""`manage.py ingest_inference --format {prometheus,csv} PATH [--cluster NAME]`.

prometheus: text exposition scrapes and/or `query_range` JSON responses (vLLM, Triton counters);
csv: endpoint, window_start, window_end, requests, prompt_tokens, generation_tokens. PATH is a
file or a folder; all its files are one import batch (consecutive scrapes may sit in different
files). See finops/inference/parsers for the formats.

After a successful import the EndpointCost rollup is rebuilt for the months the usage touches
(from the ledger as it stands; it does not re-run attribution).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.models import ImportBatch
from finops.inference.parsers import USAGE_PARSERS
from finops.inference.services import usage_batch_create
from finops.inference.tasks import TIME_LIMIT, ingest_inference_batch, rebuild_endpoint_costs


class Command(BaseCommand):
    help = "Import inference request and token counters per endpoint (Prometheus or CSV)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=sorted(USAGE_PARSERS))
        parser.add_argument("path", help="a file, or a folder of files read together")
        parser.add_argument("--cluster", default="default", help="cluster name (default: default)")
        parser.add_argument(
            "--no-rollup",
            action="store_true",
            help="do not rebuild endpoint costs for the months the usage touches",
        )
        parser.add_argument(
            "--timeout", type=float, default=float(TIME_LIMIT), help="seconds to wait per task"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.exists():
            raise CommandError(f"{path}: no such file or folder")
        batch = usage_batch_create(format=options["format"], cluster=options["cluster"], path=path)
        if batch.status == ImportBatch.Status.DUPLICATE:
            self.stdout.write(f"{path}: skipped, {batch.error}")
            return
        try:
            summary = ingest_inference_batch.delay(batch.pk).get(timeout=options["timeout"])
        except CeleryTimeoutError:
            raise CommandError(f"{path}: batch {batch.pk} still running") from None
        if summary["status"] != ImportBatch.Status.SUCCEEDED:
            raise CommandError(f"{path}: batch {batch.pk} {summary['status']}: {summary['error']}")
        self.stdout.write(
            f"{path}: batch {batch.pk} succeeded: {summary['row_count']} usage windows stored"
        )
        if options["no_rollup"]:
            return
        for month in summary["months"]:
            rows = rebuild_endpoint_costs.delay(month).get(timeout=options["timeout"])
            self.stdout.write(f"endpoint costs {month}: {rows} rows")
