"""`manage.py demo`: the demo organisation and six months of GPU data (--months), ingested.

Writes each month under --out/<month>/ in each source's own format (AWS CUR 2.0, GCP BigQuery
export, Azure EA amortised cost details, CoreWeave usage priced by contract rates, an Oracle FOCUS
1.2 file; sacct logs, a Kubernetes pod list, vLLM counters as Prometheus query_range exports;
training-run metrics as Megatron-LM and torchtitan logs and the generic CSV), then runs the same
commands a user runs, month after month: ingest_billing, ingest_jobs, ingest_inference (each
with --no-attribute / --no-rollup), attribute, ingest_run_metrics. What the months show (growth,
weekends, a reservation bought, spot requeues, a runaway, a restated bill): history.py. Then the
budgets are evaluated day by day (check_budgets --as-of), so each alert is raised on its day.
Safe to re-run: the files are byte-identical for a seed, so ingest skips them, and attribution
replaces its rows.
"""

from __future__ import annotations

import logging
import os
import time
from argparse import ArgumentParser
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test import override_settings

from finops.demo.budgets import demo_budgets_ensure, demo_budgets_replay
from finops.demo.dataset import (
    DemoFile,
    Format,
    aws_restated_write,
)
from finops.demo.fleet import CLOUDS, Month, Scale
from finops.demo.focus_catalogue import Row
from finops.demo.history import (
    RESTATEMENT_CREDIT,
    MonthPlan,
    history_plans,
    restated_index,
    restatement_row,
)
from finops.demo.mailbox import DemoMailbox, demo_mailbox
from finops.demo.organisation import (
    FINANCE_USERNAME,
    LEAD_USERNAME,
    VIEWER_USERNAME,
    coreweave_rates_ensure,
    demo_organisation_ensure,
)
from finops.demo.prebuild import BuiltMonth, months_built
from finops.demo.run_metrics import MetricsFile
from finops.demo.selectors import (
    demo_alerts,
    demo_alerts_last_id,
    demo_emails_count,
    demo_endpoints,
    demo_month_totals,
    demo_reconciliation,
    demo_summary,
)
from finops.demo.utilisation import serving_utilisation_files

# Endpoints listed with their unit costs in the summary.
TOP_ENDPOINTS = 5
# The demo logins' passwords: the environment variable, else a default printed in the README.
FINANCE_PASSWORD = ("DEMO_FINANCE_PASSWORD", "finance-demo")
LEAD_PASSWORD = ("DEMO_LEAD_PASSWORD", "lead-demo")
VIEWER_PASSWORD = ("DEMO_VIEWER_PASSWORD", "viewer-demo")
DEFAULT_MONTHS = 6
AWS_SOURCE = "aws-cur-demo"


def demo_password(variable: str, default: str) -> tuple[str, str]:
    """(password, where it came from) for one demo login."""
    value = os.environ.get(variable, "")
    if value:
        return value, f"password from {variable}"
    return default, f"password {default}: the public default; set {variable} to choose one"


def _month(text: str) -> Month:
    try:
        return Month.parse(text)
    except ValueError as exc:
        raise CommandError(f"--month must be YYYY-MM, not {text!r}") from exc


def _months(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 24:
        raise CommandError(f"--months must be a whole number from 1 to 24, not {text!r}")
    return value


@contextmanager
def _logs_to(stream: TextIO | None) -> Iterator[None]:
    """The app's INFO log lines (pipeline steps, anomaly counts) into the demo log while the
    demo runs, not over its summary; None: left as they are."""
    if stream is None:
        yield
        return
    logger = logging.getLogger("finops")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = saved


def _days(months: list[Month]) -> list[date]:
    """Every day of the months, in order."""
    first, end = months[0].start.date(), months[-1].end.date()
    return [first + timedelta(days=n) for n in range((end - first).days)]


def previous_month(today: datetime) -> Month:
    """The last full calendar month before `today` (UTC)."""
    if today.month == 1:
        return Month(today.year - 1, 12)
    return Month(today.year, today.month - 1)


def _demo_users_check(*, allowed: bool) -> None:
    """The demo logins have well-known names (and, by default, passwords): on a real database
    (anything but the embedded SQLite) they are created only when asked for explicitly."""
    if connection.vendor != "sqlite" and not allowed:
        raise CommandError(
            f"demo: refusing to create the demo logins {FINANCE_USERNAME!r}, {LEAD_USERNAME!r} "
            f"and {VIEWER_USERNAME!r} on a {connection.vendor} database: their names and default "
            "passwords are public. Pass --allow-demo-users for a throwaway database (and set "
            f"{FINANCE_PASSWORD[0]} / {LEAD_PASSWORD[0]} / {VIEWER_PASSWORD[0]}), or use "
            "--files-only."
        )


DEFAULT_DEMO_URL = "http://127.0.0.1:8000"


def demo_url() -> str:
    """Where the demo is served: FINOPS_DEMO_URL (`make demo` passes its HOST and PORT), else
    runserver's default address."""
    return os.environ.get("FINOPS_DEMO_URL", "").strip() or DEFAULT_DEMO_URL


class Command(BaseCommand):
    log: TextIO | None = None
    sub_verbosity = 0
    began = 0.0
    help = (
        "Build the demo organisation and months of GPU billing, job and run-metrics data "
        "(six by default), and ingest them."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
        parser.add_argument(
            "--month", type=_month, default=None,
            help="YYYY-MM, the last month built (default: last full month, UTC)",
        )  # fmt: skip
        parser.add_argument(
            "--months", type=_months, default=DEFAULT_MONTHS,
            help=f"how many months up to --month (default {DEFAULT_MONTHS})",
        )  # fmt: skip
        parser.add_argument("--scale", choices=Scale.CHOICES, default=Scale.FULL)
        parser.add_argument(
            "--out", type=Path, default=None, help="output folder (default FINOPS_DATA_DIR/demo)"
        )
        parser.add_argument(
            "--files-only", action="store_true", help="write the files, ingest nothing"
        )
        parser.add_argument(
            "--allow-demo-users",
            action="store_true",
            help="create the demo logins (finance, lead, viewer) on a database other than "
            "SQLite too",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["files_only"]:
            _demo_users_check(allowed=options["allow_demo_users"])
        last: Month = options["month"] or previous_month(datetime.now(UTC))
        out: Path = options["out"] or Path(settings.FINOPS_DATA_DIR) / "demo"
        count: int = options["months"]
        plans = history_plans(last=last, count=count) if count > 1 else None
        months = [p.month for p in plans] if plans else [last]
        self.began = time.monotonic()
        self.sub_verbosity = max(0, options["verbosity"] - 1)
        # Every link in every email (budgets, anomalies, statements) points at the served site.
        url = demo_url()
        with override_settings(SITE_URL=url, FINOPS_BASE_URL=url):
            if options["files_only"]:
                for built in months_built(
                    seed=options["seed"], months=months, scale=options["scale"], plans=plans,
                    out=out, keep_aws=None,
                ):  # fmt: skip
                    self._print_files(built.files, built)
                return
            demo_organisation_ensure(
                finance_password=demo_password(*FINANCE_PASSWORD)[0],
                lead_password=demo_password(*LEAD_PASSWORD)[0],
                viewer_password=demo_password(*VIEWER_PASSWORD)[0],
            )
            self._build(options, plans, months, out)

    def _build(
        self, options: dict[str, Any], plans: list[MonthPlan] | None, months: list[Month],
        out: Path,
    ) -> None:  # fmt: skip
        emails_before = demo_emails_count()
        alerts_before = demo_alerts_last_id()
        log_path = out / "demo.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        restated = restated_index(len(months)) if plans else None
        metrics_files: list[MetricsFile] = []
        with (
            demo_mailbox(out=out) as mailbox,
            log_path.open("w", encoding="utf-8") as log,
            _logs_to(log if not self.sub_verbosity else None),
        ):
            self.log = log
            self.out = out
            aws_rows: list[Row] = []
            for built in months_built(
                seed=options["seed"], months=months, scale=options["scale"], plans=plans,
                out=out, keep_aws=restated,
            ):  # fmt: skip
                if plans is None:
                    self._print_files(built.files, built)
                # Metrics first (kept until their jobs are in the ledger): the month's
                # attribution then stores their run economics once (finops.economics), instead
                # of every metrics file refreshing the attributed month's runs again.
                for file in built.metrics:
                    self._metrics_ingest(file)
                self._month_ingest(built)
                aws_rows = built.aws_rows or aws_rows
                metrics_files.extend(built.metrics)
                self._print_month(built)
            if restated is not None and aws_rows:
                self._restate(months[restated], aws_rows, out)
            # Budgets sized from the last month, some crossed; evaluated day by day over every
            # month as a daily check_budgets would have, so each alert is raised on its day
            # (once: a re-run sends nothing new).
            demo_budgets_ensure(month=months[-1].start.date())
            demo_budgets_replay(days=_days(months))
        self.log = None
        self._print_metrics(metrics_files)
        self._print_alerts(alerts_before)
        self._print_emails(demo_emails_count() - emails_before, mailbox)
        self.stdout.write(f"the ingest and attribute commands' own output: {log_path}")
        self._print_history(months, restated)
        self._print_summary(months[-1], time.monotonic() - self.began)

    def _month_ingest(self, built: BuiltMonth) -> None:
        month = built.month
        # The CoreWeave export has no prices: the contract rate card must exist before it.
        last_day = (month.end - timedelta(days=1)).date()
        coreweave_rates_ensure(rates=built.rates, first=month.start.date(), last=last_day)
        # --no-attribute / --no-rollup: attribute the month once, after every file is in.
        for file in built.files:
            self._ingest(file)
        # The serving pods' measured GPU utilisation (DCGM), as a team would import it.
        for cluster, path in serving_utilisation_files(month=month, out=self.out):
            self._call("ingest_utilisation", "--format", "csv", str(path), "--cluster", cluster)
        self._call("attribute", "--month", month.label)

    def _restate(self, month: Month, aws_rows: list[Row], out: Path) -> None:
        """The AWS bill of an earlier month delivered again with an SLA credit: imported under
        the same source, it supersedes the first delivery, and the month is attributed again."""
        before = demo_month_totals(month=month)
        path = aws_restated_write(
            focus_rows=[*aws_rows, restatement_row(aws_rows)], month=month, out=out
        )
        self._call(
            "ingest_billing", "--format", Format.AWS_CUR, str(path), "--source", AWS_SOURCE,
            "--no-attribute",
        )  # fmt: skip
        self._call("attribute", "--month", month.label)
        after = demo_month_totals(month=month)
        self.stdout.write(
            f"restated {month.label}: the AWS bill delivered again with an SLA credit of "
            f"{RESTATEMENT_CREDIT:,.2f} USD; invoiced cost (BilledCost) {before.invoiced:,.2f} -> "
            f"{after.invoiced:,.2f} USD, amortised cost (EffectiveCost) {before.effective:,.2f} -> "
            f"{after.effective:,.2f} USD (the first delivery is kept, superseded)"
        )

    def _ingest(self, file: DemoFile) -> None:
        path = str(file.path)
        if file.kind == "billing":
            self._call(
                "ingest_billing", "--format", file.format, path, "--source", file.source,
                "--no-attribute",
            )  # fmt: skip
        elif file.kind == "jobs":
            zone = ["--time-zone", file.time_zone] if file.format == "slurm" else []
            self._call(
                "ingest_jobs", "--format", file.format, path, "--cluster", file.source, *zone,
                "--no-attribute",
            )  # fmt: skip
        else:
            self._call(
                "ingest_inference", "--format", file.format, path, "--cluster", file.source,
                "--no-rollup",
            )  # fmt: skip

    def _metrics_ingest(self, file: MetricsFile) -> None:
        """Run metrics through the same command a team runs: the CSV names its runs, a log
        folder (one log per attempt) is given its run, team and model."""
        if file.format == "csv":
            self._call("ingest_run_metrics", "--format", "csv", str(file.path))
            return
        self._call(
            "ingest_run_metrics", "--format", file.format, str(file.path),
            "--run-id", file.run_id, "--team", file.team,
            "--model-params", str(file.model_params), "--seq-length", str(file.seq),
            "--dtype", "bf16",
        )  # fmt: skip

    def _call(self, name: str, *args: str) -> None:
        # The sub-commands' own lines go to the demo log (or the console with -v 2).
        stream = self.stdout if self.sub_verbosity or self.log is None else self.log
        try:
            call_command(
                name, *args, verbosity=self.sub_verbosity, stdout=stream, stderr=self.stderr
            )
        except CommandError as exc:
            raise CommandError(f"demo: `{name} {' '.join(args)}` failed: {exc}") from exc

    def _print_files(self, files: list[DemoFile], built: BuiltMonth) -> None:
        units = {"billing": "rows", "jobs": "jobs", "inference": "samples"}
        for file in files:
            unit = "pods" if file.format == "kubernetes" else units[file.kind]
            self.stdout.write(f"wrote {file.format:<13} {file.path} ({file.rows:,} {unit})")
        self.stdout.write(
            f"{built.month.label} bills at list/contract prices: invoiced cost (BilledCost) "
            f"{built.invoiced:,.2f} USD"
        )

    def _print_month(self, built: BuiltMonth) -> None:
        jobs = sum(f.rows for f in built.files if f.kind == "jobs")
        self.stdout.write(
            f"{built.month.label}: {len(built.files)} files ingested and attributed, {jobs:,} "
            f"jobs and pods, invoiced cost (BilledCost) {built.invoiced:,.2f} USD, amortised cost "
            f"(EffectiveCost) {built.effective:,.2f} USD ({time.monotonic() - self.began:.0f} s)"
        )

    def _print_metrics(self, files: list[MetricsFile]) -> None:
        runs = Counter(f.format for f in files if f.format != "csv")
        csv_files = [f for f in files if f.format == "csv"]
        self.stdout.write(
            f"run metrics ingested: {sum(f.rows for f in files):,} logged steps; "
            f"{len(csv_files)} generic CSV files (fine-tunes, vision, speech, recsys), "
            + ", ".join(f"{n} {fmt} runs (one log per attempt)" for fmt, n in sorted(runs.items()))
        )

    def _print_alerts(self, after_id: int) -> None:
        alerts = demo_alerts(after_id=after_id)
        self.stdout.write(
            f"{len(alerts)} budget alerts, raised day by day as they would have been:"
        )
        for a in alerts:
            self.stdout.write(
                f"  {a.crossed_on} {a.budget:<26} {a.email}: {a.kind} {a.threshold} % "
                f"(actual {a.actual:,.2f} {a.currency} of {a.amount:,.2f} {a.currency})"
            )

    def _print_history(self, months: list[Month], restated: int | None) -> None:
        if len(months) == 1:
            return
        self.stdout.write("")
        self.stdout.write("month     invoiced cost (BilledCost)  amortised cost (EffectiveCost)")
        for index, month in enumerate(months):
            totals = demo_month_totals(month=month)
            note = "  restated" if index == restated else ""
            self.stdout.write(
                f"{month.label}  {totals.invoiced:>22,.2f} USD  "
                f"{totals.effective:>26,.2f} USD{note}"
            )

    def _print_summary(self, month: Month, seconds: float) -> None:
        summary = demo_summary(month=month, clusters=[c.cluster for c in CLOUDS])
        categories = summary.by_category
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Demo month {month.label} ready in {seconds:.0f} s"))
        lines = [
            f"line items:                     {summary.line_items:,}",
            f"jobs (every month):             {summary.jobs:,}",
            f"invoiced cost (BilledCost):     {summary.invoiced:,.2f} USD",
            f"amortised cost (EffectiveCost): {summary.effective:,.2f} USD",
            f"attributed:                     {summary.allocated:,.2f} USD",
            *(
                f"  {name:<20} {amount:,.2f} USD"
                for name, amount in categories.items()
                if name not in ("idle", "unallocated")
            ),
            f"idle GPU cost:                  {categories.get('idle', 0):,.2f} USD",
            f"unallocated:                    {categories.get('unallocated', 0):,.2f} USD",
            f"reconciliation difference: {summary.difference:f} USD",
            *(
                f"  {b.provider} {b.account}: amortised cost {b.effective:,.2f} {b.currency}, "
                f"difference {b.difference:f} {b.currency}"
                for b in demo_reconciliation(month=month)
            ),
            "endpoints (month):",
            *(
                f"  {e.endpoint:<18} {e.cost:>12,.2f} {e.currency}  {e.requests:>12,} requests"
                f"  {self._unit(e.per_1k_requests, e.currency)} per 1k requests"
                f"  {self._unit(e.per_1m_tokens, e.currency)} per 1M tokens"
                for e in demo_endpoints(month=month)[:TOP_ENDPOINTS]
            ),
            "",
            f"Open {demo_url()} and log in as:",
            f"  finance: {FINANCE_USERNAME} ({demo_password(*FINANCE_PASSWORD)[1]})",
            f"  team lead (language, speech): {LEAD_USERNAME} ({demo_password(*LEAD_PASSWORD)[1]})",
            f"  viewer (read-only): {VIEWER_USERNAME} ({demo_password(*VIEWER_PASSWORD)[1]})",
        ]
        for line in lines:
            self.stdout.write(line)

    def _print_emails(self, queued: int, mailbox: DemoMailbox) -> None:
        where = (
            f"written to {mailbox.folder}/ (a file each) instead of the console"
            if mailbox.folder is not None
            else f"sent through {settings.EMAIL_BACKEND}"
        )
        self.stdout.write(
            f"{queued} alert emails queued (budgets, anomalies), {where}; the outbox is at "
            f"{demo_url()}/admin/notifications/emailnotification/"
        )

    @staticmethod
    def _unit(value: Decimal | None, currency: str) -> str:
        return "n/a" if value is None else f"{value:,.4f} {currency}"
