"""ingest_billing --format FMT PATH_OR_URI [--source NAME] [--delivery]: import billing
export files, one batch per file or per delivery.

Thin: validate arguments, record a batch (one part per file of the delivery), dispatch its
chord (one task per part, then the atomic swap) and wait for it, print what each batch did. The
work (and the record of any failure) is in the services. A storage URI is first resolved to
deliveries (billing_ingest.sources.uris), each downloaded into a temporary folder as its parts;
a single file is a delivery of one part, so every import takes the same path.
"""

from __future__ import annotations

import time
from argparse import ArgumentParser, BooleanOptionalAction
from pathlib import Path
from typing import Any, TextIO, cast

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from billing_ingest.loading.progress import BatchProgressBar
from billing_ingest.management.pipeline import start_pipeline
from billing_ingest.models import ImportBatch
from billing_ingest.parsers import billing_parser, billing_paths
from billing_ingest.selectors import months_changed_by_batches
from billing_ingest.services.batches import import_batch_fail_if_dead, import_batch_pipeline_set
from billing_ingest.services.billing import BillingFile, billing_batch_create, billing_batch_finish
from billing_ingest.services.billing_files import billing_default_source, billing_file_wanted
from billing_ingest.services.deliveries import billing_uri_ingest
from billing_ingest.services.dispatch import billing_batch_dispatch
from billing_ingest.sources import SourceFetchError
from billing_ingest.sources.parts import parts_check
from billing_ingest.sources.uris import uri_scheme
from finops.core.wording import counted

URI_HELP = (
    "PATH may be a storage URI. s3://BUCKET/PREFIX/EXPORT-NAME (--format aws-cur or focus): an "
    "AWS Data Export; the newest manifest of each BILLING_PERIOD is read and its data files "
    "downloaded (credentials from the usual AWS environment). az://CONTAINER/PREFIX (--format "
    "azure or focus): Azure cost exports below PREFIX; the newest run of each "
    "<export>/YYYYMMDD-YYYYMMDD folder (by its manifest.json when runs have one) is downloaded "
    "(AZURE_STORAGE_CONNECTION_STRING). bq://PROJECT.DATASET.TABLE?month=YYYYMM[,YYYYMM] "
    "(--format gcp-bigquery): the BigQuery billing export table, one query per invoice month "
    "(Google application default credentials). gs://BUCKET/PREFIX (any file format): the "
    "files below PREFIX, one delivery per billing-period folder (YYYY-MM, YYYYMM, "
    "BILLING_PERIOD=, invoice_month=, ...; the newest upload of a month wins), else one per "
    "file (Google application default credentials). "
    "Each delivery (one month's manifest or run, however many parts) is imported as ONE batch, "
    "one task per part, swapped in at once when every part has loaded, "
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
            help="a billing file, a folder of them, or an s3://, az://, gs:// or bq:// URI",
        )
        parser.add_argument(
            "--source",
            help=(
                "billing source name; rows of the same source and billing period are replaced "
                "by each new import. Default: FORMAT:STEM per file, where STEM is the file name "
                "without its .csv/.gz/.parquet suffixes (report-2024-09.csv.gz with --format "
                "focus -> focus:report-2024-09). With a folder, --source applies to every file, "
                "so files of one period would replace each other: import a multi-part export "
                "with --delivery (one batch) instead. With --delivery: default "
                "FORMAT:FOLDER-NAME. With a URI: default FORMAT:URI of the export, one source "
                "for all its months (a URI covering several Azure exports gets one source per "
                "export)."
            ),
        )
        parser.add_argument(
            "--delivery",
            action="store_true",
            help=(
                "PATH is a folder holding the parts of ONE delivery (e.g. a downloaded export "
                "month): import its files as one batch, one task per part, swapped in at once. "
                "Default source: FORMAT:FOLDER-NAME."
            ),
        )
        parser.add_argument(
            "--no-attribute",
            action="store_true",
            help=(
                "do not start the pipeline (attribution, endpoint costs, ...) for the billing "
                "months the import touched (default: do; the reconciliation says stale until "
                "they are attributed)"
            ),
        )
        parser.add_argument(
            "--progress",
            action=BooleanOptionalAction,
            default=None,
            help="draw a progress bar (parts, rows) while workers load a delivery "
            "(default: when the output is a terminal)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=float(settings.CELERY_TASK_TIME_LIMIT + 60),
            help="seconds to wait for each file's import task (default: task time limit + 60)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._no_attribute = bool(options["no_attribute"])
        progress = options.get("progress")
        self._progress = self.stdout.isatty() if progress is None else bool(progress)
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
                self.stdout.write(f"{path}: skipped (not Parquet, gzip or CSV by its content)")
        if not paths:
            raise CommandError(f"no billing files under {root}")
        if options["delivery"]:
            return [self._ingest_folder_delivery(root, paths, format_name, options)]

        return [
            self._ingest_one(
                path, format_name=format_name, source=options["source"], timeout=options["timeout"]
            )
            for path in paths
        ]

    def _ingest_folder_delivery(
        self, root: Path, paths: list[Path], format_name: str, options: dict[str, Any]
    ) -> ImportBatch:
        if not root.is_dir():
            raise CommandError(f"--delivery needs a folder; {root} is a file")
        labels = [str(path.relative_to(root)) for path in paths]
        try:
            parts_check(paths, labels=labels)
        except SourceFetchError as exc:
            raise CommandError(f"{root}: {exc}") from None
        batch = billing_batch_create(
            format=format_name,
            source=options["source"] or billing_default_source(format=format_name, path=root),
            # Absolute, so a worker started in another directory finds the files.
            files=[BillingFile(p.resolve(), label) for p, label in zip(paths, labels, strict=True)],
            name=str(root.resolve()),
        )
        return self._run(batch, label=str(root), timeout=options["timeout"])

    def _ingest_uri(
        self, uri: str, *, format_name: str, options: dict[str, Any]
    ) -> list[ImportBatch]:
        def run(batch: ImportBatch) -> ImportBatch:
            return self._run_batch(batch, timeout=options["timeout"])

        try:
            return billing_uri_ingest(
                uri=uri, format=format_name, source=options["source"], run=run, report=self._report
            )
        except SourceFetchError as exc:
            raise CommandError(str(exc)) from None

    def _finish(self, batches: list[ImportBatch], *, options: dict[str, Any]) -> None:
        self._warn_self_superseded(batches)
        if not options["no_attribute"]:
            # Settling each batch recorded its months; start their pipeline (finops.pipeline:
            # attribute, endpoint costs, ...) once for all of them.
            months = months_changed_by_batches(batch_ids=[b.pk for b in batches])
            start_pipeline(self, months=months)
        done = {ImportBatch.Status.SUCCEEDED, ImportBatch.Status.DUPLICATE}
        failed = [b for b in batches if b.status not in done]
        if failed:
            errors = "; ".join(b.error or f"{b.file_name}: {b.status}" for b in failed)
            raise CommandError(f"{len(failed)} of {counted(len(batches), 'file')} failed: {errors}")

    def _ingest_one(
        self, path: Path, *, format_name: str, source: str | None, timeout: float
    ) -> ImportBatch:
        batch = billing_batch_create(
            format=format_name,
            source=source or billing_default_source(format=format_name, path=path),
            # Absolute, so a worker started in another directory finds the file.
            files=[BillingFile(path.resolve(), path.name)],
        )
        return self._run(batch, label=str(path), timeout=timeout)

    def _run(self, batch: ImportBatch, *, label: str, timeout: float) -> ImportBatch:
        if batch.status != ImportBatch.Status.DUPLICATE:
            batch = self._run_batch(batch, timeout=timeout)
        self._report(label, batch)
        return batch

    def _run_batch(self, batch: ImportBatch, *, timeout: float) -> ImportBatch:
        """Fan the batch's parts out over the workers and wait for the chord's swap."""
        # One pipeline run per month once every batch is in (_finish), not one per file.
        pipeline = ImportBatch.Pipeline.OFF if self._no_attribute else ImportBatch.Pipeline.CALLER
        import_batch_pipeline_set(batch_id=batch.pk, pipeline=pipeline)
        try:
            result = billing_batch_dispatch(batch_id=batch.pk)
        except Exception as exc:
            batch.refresh_from_db()
            if batch.status == ImportBatch.Status.FAILED:  # nothing could be queued
                raise CommandError(f"{batch.file_name}: {batch.error}") from None
            self._chord_broke(batch, exc)
            result = None
        try:
            if result is not None:
                self._wait(batch, result, timeout=timeout)
        except Exception as exc:
            self._chord_broke(batch, exc)
        batch.refresh_from_db()
        return batch

    def _wait(self, batch: ImportBatch, result: Any, *, timeout: float) -> None:
        """Wait for the chord in short polls; between them, a batch whose worker stopped its
        heartbeat is failed (import_batch_fail_if_dead), so a dead worker is reported within
        FINOPS_WORKER_HEARTBEAT_TIMEOUT, not when the broker redelivers its task."""
        from celery.exceptions import TimeoutError as CeleryTimeout

        deadline = time.monotonic() + timeout
        out = cast(TextIO, self.stdout._out)
        show = getattr(self, "_progress", False) and not result.ready()
        with BatchProgressBar(
            batch_id=batch.pk, label=f"batch {batch.pk}", out=out, show=show
        ) as bar:
            while True:
                left = deadline - time.monotonic()
                try:
                    result.get(timeout=max(min(settings.FINOPS_COMMAND_POLL_SECONDS, left), 0.05))
                    return
                except CeleryTimeout:
                    bar.update()
                    now = import_batch_fail_if_dead(batch_id=batch.pk)
                    if now.status != ImportBatch.Status.RUNNING:
                        return  # settled, failed, or found dead: the batch row says which
                    if time.monotonic() >= deadline:
                        raise

    def _chord_broke(self, batch: ImportBatch, exc: Exception) -> None:
        """A part task died without returning (hard time limit, lost worker): the chord fails
        instead of calling back. Its link_error fails the batch on a worker; doing the same here
        (idempotent) means the failure is recorded before we report. A timeout is different:
        the parts may still be loading, so the batch stays RUNNING (its rows invisible) and
        finishes on its own."""
        from celery.exceptions import TimeoutError as CeleryTimeout

        if isinstance(exc, CeleryTimeout):
            batch.error = f"import did not finish within the timeout; batch {batch.pk} is running"
            ImportBatch.objects.filter(id=batch.pk, error="").update(error=batch.error)
            return
        billing_batch_finish(batch_id=batch.pk)

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
        for currency, values in sorted(batch.currency_totals.items()):
            credits = values.get("credits") or {}
            if credits:
                listed = ", ".join(f"{kind} {amount}" for kind, amount in sorted(credits.items()))
                self.stdout.write(
                    f"{path}: credits {currency}: {listed} (in BilledCost and EffectiveCost: "
                    f"invoiced {values['billed']})"
                )
        for note, rows in batch.notes.items():
            self.stdout.write(f"{path}: note: {counted(rows, 'row')}: {note}")

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
