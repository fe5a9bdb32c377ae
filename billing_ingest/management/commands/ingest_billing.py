"""ingest_billing --format FMT PATH_OR_URI [--source NAME]: import billing export files, one
batch each.

Thin: validate arguments, record a batch per file, run the import task and wait for it, print
what each file did. The work (and the record of any failure) is in the task's service. A storage
URI is first resolved to deliveries (billing_ingest.sources.uris), each downloaded into a
temporary folder and joined into one file, which then takes the same per-file path.
"""

from __future__ import annotations

import shutil
import tempfile
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from billing_ingest.models import ImportBatch
from billing_ingest.parsers import billing_parser, billing_paths
from billing_ingest.reattribute import (
    billing_months_touched,
    months_reattribute,
    report_reattribution,
)
from billing_ingest.services.batches import import_batch_create, import_batch_record_failure
from billing_ingest.services.billing import billing_default_source, billing_file_wanted
from billing_ingest.sources import SourceFetchError
from billing_ingest.sources.uris import Delivery, uri_deliveries, uri_scheme
from billing_ingest.tasks.billing import ingest_billing_batch

URI_HELP = (
    "PATH may be a storage URI. s3://BUCKET/PREFIX/EXPORT-NAME (--format aws-cur or focus): an "
    "AWS Data Export; the newest manifest of each BILLING_PERIOD is read and its data files "
    "downloaded (credentials from the usual AWS environment). az://CONTAINER/PREFIX (--format "
    "azure or focus): Azure cost exports below PREFIX; the newest run of each "
    "<export>/YYYYMMDD-YYYYMMDD folder (by its manifest.json when runs have one) is downloaded "
    "(AZURE_STORAGE_CONNECTION_STRING). bq://PROJECT.DATASET.TABLE?month=YYYYMM[,YYYYMM] "
    "(--format gcp-bigquery): the BigQuery billing export table, one query per invoice month "
    "(Google application default credentials). gs:// is not supported yet. "
    "Each delivery (one month's manifest or run, however many parts) is joined into one file "
    "and imported as ONE batch "
    "with the default source FORMAT:URI-of-the-export (e.g. aws-cur:s3://b/cur/gpu), the same "
    "for every delivery: a re-delivered month replaces all of the old delivery's rows at once, "
    "and parts never replace each other. A delivery whose manifest names a missing file fails "
    "alone (recorded as a failed batch) and leaves that month's earlier data as it was; a "
    "store that refuses access stops the import before anything changes."
)


class Command(BaseCommand):
    help = (
        "Import billing export files (one import batch per file). PATH is a file or a folder "
        "(every .csv, .gz and .parquet file below it). A new file for the same source and "
        "billing period replaces the earlier one's rows; the same bytes imported again are a "
        "no-op. " + URI_HELP
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--format", required=True, help="billing format, e.g. focus", dest="format"
        )
        parser.add_argument(
            "path",
            metavar="PATH_OR_URI",
            help="a billing file, a folder of them, or an s3:// or az:// export URI",
        )
        parser.add_argument(
            "--source",
            help=(
                "billing source name; rows of the same source and billing period are replaced "
                "by each new import. Default: FORMAT:STEM per file, where STEM is the file name "
                "without its .csv/.gz/.parquet suffixes (report-2024-09.csv.gz with --format "
                "focus -> focus:report-2024-09). With a folder, --source applies to every file, "
                "so files of one period would replace each other: leave it out for multi-part "
                "exports. With a URI: default FORMAT:URI of the export, one source for all its "
                "months (a URI covering several Azure exports gets one source per export)."
            ),
        )
        parser.add_argument(
            "--no-attribute",
            action="store_true",
            help="do not re-attribute the billing months the import touched (default: do)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=float(settings.CELERY_TASK_TIME_LIMIT + 60),
            help="seconds to wait for each file's import task (default: task time limit + 60)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        format_name: str = options["format"]
        try:
            billing_parser(format_name)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if uri_scheme(options["path"]) is not None:
            batches = self._ingest_uri(options["path"], format_name=format_name, options=options)
        else:
            batches = self._ingest_paths(
                Path(options["path"]), format_name=format_name, options=options
            )
        self._finish(batches, options=options)

    def _ingest_paths(
        self, root: Path, *, format_name: str, options: dict[str, Any]
    ) -> list[ImportBatch]:
        if not root.exists():
            raise CommandError(f"{root} does not exist")
        paths = billing_paths(root)
        if root.is_dir():
            skipped = [p for p in paths if not billing_file_wanted(p)]
            paths = [p for p in paths if billing_file_wanted(p)]
            for path in skipped:
                self.stdout.write(f"{path}: skipped (not .csv, .gz or .parquet)")
        if not paths:
            raise CommandError(f"no billing files under {root}")

        return [
            self._ingest_one(
                path, format_name=format_name, source=options["source"], timeout=options["timeout"]
            )
            for path in paths
        ]

    def _ingest_uri(
        self, uri: str, *, format_name: str, options: dict[str, Any]
    ) -> list[ImportBatch]:
        try:
            deliveries = uri_deliveries(uri, format=format_name, source=options["source"])
        except SourceFetchError as exc:
            raise CommandError(str(exc)) from None
        batches = []
        with tempfile.TemporaryDirectory(prefix="ingest-billing-") as tmp:
            for index, delivery in enumerate(deliveries):
                # One folder per delivery, removed once imported: disk holds one month at a time.
                folder = Path(tmp) / str(index)
                batches.append(
                    self._ingest_delivery(
                        delivery, folder, format_name=format_name, timeout=options["timeout"]
                    )
                )
                shutil.rmtree(folder, ignore_errors=True)
        return batches

    def _ingest_delivery(
        self, delivery: Delivery, folder: Path, *, format_name: str, timeout: float
    ) -> ImportBatch:
        try:
            path = delivery.fetch(folder)
        except SourceFetchError as exc:
            batch = import_batch_record_failure(
                kind=ImportBatch.Kind.BILLING,
                format=format_name,
                source=delivery.source,
                file_name=delivery.label,
                error=f"{delivery.label}: {exc}",
            )
            self._report(delivery.label, batch)
            return batch
        return self._ingest_one(
            path,
            format_name=format_name,
            source=delivery.source,
            timeout=timeout,
            label=delivery.label,
        )

    def _finish(self, batches: list[ImportBatch], *, options: dict[str, Any]) -> None:
        self._warn_self_superseded(batches)
        if not options["no_attribute"]:
            months = billing_months_touched(batches=batches)
            report_reattribution(
                self, months_reattribute(months=months, timeout=options["timeout"])
            )
        done = {ImportBatch.Status.SUCCEEDED, ImportBatch.Status.DUPLICATE}
        failed = [b for b in batches if b.status not in done]
        if failed:
            errors = "; ".join(b.error or f"{b.file_name}: {b.status}" for b in failed)
            raise CommandError(f"{len(failed)} of {len(batches)} file(s) failed: {errors}")

    def _ingest_one(
        self,
        path: Path,
        *,
        format_name: str,
        source: str | None,
        timeout: float,
        label: str | None = None,
    ) -> ImportBatch:
        batch = import_batch_create(
            kind=ImportBatch.Kind.BILLING,
            format=format_name,
            source=source or billing_default_source(format=format_name, path=path),
            # Absolute, so a worker started in another directory finds the file.
            path=path.resolve(),
        )
        if batch.status != ImportBatch.Status.DUPLICATE:
            try:
                ingest_billing_batch.delay(batch.pk).get(timeout=timeout)
            except Exception as exc:  # the task itself broke (time limit, lost worker)
                batch.refresh_from_db()
                if not batch.error:
                    batch.error = f"import task did not finish: {type(exc).__name__}: {exc}"
            else:
                batch.refresh_from_db()
        self._report(label or str(path), batch)
        return batch

    def _report(self, path: str, batch: ImportBatch) -> None:
        status = batch.status
        if status == ImportBatch.Status.DUPLICATE:
            self.stdout.write(f"{path}: unchanged ({batch.error}); source {batch.source}")
            return
        if status != ImportBatch.Status.SUCCEEDED:
            self.stderr.write(f"{path}: {status.upper()}: {batch.error}")
            return
        totals = ", ".join(
            f"{currency} {values['effective']}"
            for currency, values in sorted(batch.currency_totals.items())
        )
        periods = ", ".join(batch.billing_periods)
        self.stdout.write(
            f"{path}: {status}, {batch.row_count} rows, periods {periods}, "
            f"EffectiveCost {totals}; source {batch.source}, batch {batch.pk}"
        )

    def _warn_self_superseded(self, batches: list[ImportBatch]) -> None:
        # With one --source for a folder, a later file of the same period replaces an earlier
        # one from this very run: almost always a mistake, so say it.
        ids = {b.pk for b in batches}
        replaced = ImportBatch.objects.filter(
            id__in=ids, status=ImportBatch.Status.SUPERSEDED, superseded_by__in=ids
        ).values_list("file_name", "superseded_by__file_name", "source")
        for file_name, by_file_name, source in replaced:
            self.stderr.write(
                f"warning: {file_name} was replaced by {by_file_name} "
                f"(same source {source} and billing period) in this run"
            )
