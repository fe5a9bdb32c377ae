"""`manage.py attribute --month YYYY-MM`: run the month's pipeline (attribute, then the steps
that read the ledger), wait for it, and show that the month adds up."""

from __future__ import annotations

import time
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from finops.attribution.selectors.ledger import (
    attribution_run_latest,
    month_category_totals,
    month_conservation,
)
from finops.attribution.services import attribution_runs_fail_dead
from finops.attribution.tasks import TIME_LIMIT
from finops.core.months import month_argument, month_parse
from finops.pipeline.models import PipelineRun
from finops.pipeline.selectors import pipeline_step_views
from finops.pipeline.services import PipelineQueueError, pipeline_runs_fail_dead, pipeline_start


class Command(BaseCommand):
    help = (
        "Attribute a billing month's cost to teams, runs, idle and unallocated, then run the "
        "pipeline's later steps (endpoint costs, ...) for it."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--month", required=True, type=month_argument, help="billing month YYYY-MM"
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=float(TIME_LIMIT + 60),
            help="seconds to wait for the pipeline (a dead worker is reported much sooner)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        month: str = options["month"]
        first = month_parse(month)
        try:
            [run] = pipeline_start(months=[first], reason="attribute command")
        except PipelineQueueError as exc:
            raise CommandError(f"attribution of {month} not started: {exc}") from None
        run = self._wait(run, timeout=options["timeout"])
        for view in pipeline_step_views(run):
            step = view.step
            error = f": {step.error}" if step.error else ""
            took = ""
            if step.started_at is not None and step.finished_at is not None:
                took = f" in {(step.finished_at - step.started_at).total_seconds():.1f} s"
            self.stdout.write(f"  step {step.key:<16} {step.status}{took}{error}")
        if options["verbosity"] >= 2:
            self._phases(first)
        if run.status != PipelineRun.Status.SUCCEEDED:
            raise CommandError(
                f"{month}: pipeline run {run.pk} {run.status}: {run.error} "
                "(the month keeps its previous ledger; run the command again)"
            )
        self.stdout.write(f"{month}: pipeline run {run.pk} succeeded")
        self._report(first)

    def _wait(self, run: PipelineRun, *, timeout: float) -> PipelineRun:
        """Poll the run; a step whose worker stopped its heartbeat fails the run (and its
        attribution run) within FINOPS_WORKER_HEARTBEAT_TIMEOUT, not when the broker
        redelivers the step."""
        deadline = time.monotonic() + timeout
        while True:
            run.refresh_from_db()
            if run.status in (PipelineRun.Status.SUCCEEDED, PipelineRun.Status.FAILED):
                return run
            if pipeline_runs_fail_dead(run_id=run.pk):
                attribution_runs_fail_dead(month=run.month)
                continue
            if time.monotonic() >= deadline:
                raise CommandError(
                    f"pipeline run {run.pk} still {run.status} after {timeout:g} s; see /pipeline/"
                )
            time.sleep(settings.FINOPS_COMMAND_POLL_SECONDS)

    def _phases(self, first: Any) -> None:
        """Where the month's latest attribution spent its time (AttributionRun.phases)."""
        run = attribution_run_latest(month=first)
        if run is None or not run.phases:
            return
        self.stdout.write(f"  attribution run {run.pk}, seconds per phase:")
        for name, seconds in run.phases:
            self.stdout.write(f"    {name:<22} {seconds:>9.3f}")

    def _report(self, first: Any) -> None:
        # Finance's words: the ledger splits the amortised cost (EffectiveCost); the invoiced
        # cost (BilledCost) is shown beside it, never called "billed".
        self.stdout.write("  ledger by category (amortised cost):")
        for (currency, category), total in month_category_totals(month=first).items():
            self.stdout.write(f"  {category:<12} {total:>24} {currency}")
        unbalanced = 0
        for (provider, account, currency), sums in month_conservation(month=first).items():
            self.stdout.write(
                f"  conservation {provider or '-'} / {account or '-'} {currency}: "
                f"amortised cost {sums['amortised']:f} {currency} allocated "
                f"{sums['allocated']:f} {currency} difference {sums['difference']:f} {currency} "
                f"(invoiced cost {sums['invoiced']:f} {currency})"
            )
            unbalanced += sums["difference"] != 0
        if unbalanced:
            raise CommandError(f"{unbalanced} provider/account/currency totals do not add up")
        self.stdout.write(self.style.SUCCESS("conservation check: difference 0"))
