"""`manage.py demo`: the demo organisation and a realistic month of GPU data, ingested.

Writes the month under --out/<month>/ in each source's own format (AWS CUR 2.0, GCP BigQuery
export, Azure EA amortised cost details, CoreWeave usage priced by contract rates, an Oracle FOCUS
1.2 file; sacct logs, a Kubernetes pod list, vLLM counters as Prometheus query_range exports),
then runs the same commands a user runs: ingest_billing, ingest_jobs, ingest_inference (each
with --no-attribute / --no-rollup), and attribute once at the end, whose pipeline rebuilds the
endpoint costs. Safe to re-run: the files are byte-identical for a seed, so ingest skips them,
and attribution replaces its rows.
"""

from __future__ import annotations

import os
import time
from argparse import ArgumentParser
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from finops.demo.budgets import demo_budgets_ensure
from finops.demo.dataset import DemoFile, coreweave_rates, dataset_build, dataset_write
from finops.demo.fleet import CLOUDS, Month, Scale
from finops.demo.mailbox import DemoMailbox, demo_mailbox
from finops.demo.organisation import (
    FINANCE_USERNAME,
    LEAD_USERNAME,
    coreweave_rates_ensure,
    demo_organisation_ensure,
)
from finops.demo.selectors import (
    demo_emails_count,
    demo_endpoints,
    demo_reconciliation,
    demo_summary,
)

# Endpoints listed with their unit costs in the summary.
TOP_ENDPOINTS = 5
# The demo logins' passwords: the environment variable, else a default printed in the README.
FINANCE_PASSWORD = ("DEMO_FINANCE_PASSWORD", "finance-demo")
LEAD_PASSWORD = ("DEMO_LEAD_PASSWORD", "lead-demo")


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
            f"demo: refusing to create the demo logins {FINANCE_USERNAME!r} and "
            f"{LEAD_USERNAME!r} on a {connection.vendor} database: their names and default "
            "passwords are public. Pass --allow-demo-users for a throwaway database (and set "
            f"{FINANCE_PASSWORD[0]} / {LEAD_PASSWORD[0]}), or use --files-only."
        )


DEFAULT_DEMO_URL = "http://127.0.0.1:8000"


def demo_url() -> str:
    """Where the demo is served: FINOPS_DEMO_URL (`make demo` passes its HOST and PORT), else
    runserver's default address."""
    return os.environ.get("FINOPS_DEMO_URL", "").strip() or DEFAULT_DEMO_URL


class Command(BaseCommand):
    help = "Build the demo organisation and a month of GPU billing and job data, and ingest it."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--seed", type=int, default=42, help="random seed (default 42)")
        parser.add_argument(
            "--month", type=_month, default=None, help="YYYY-MM (default: last full month, UTC)"
        )
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
            help="create the demo logins (finance, lead) on a database other than SQLite too",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["files_only"]:
            _demo_users_check(allowed=options["allow_demo_users"])
        month: Month = options["month"] or previous_month(datetime.now(UTC))
        out: Path = options["out"] or Path(settings.FINOPS_DATA_DIR) / "demo"
        began = time.monotonic()

        dataset = dataset_build(seed=options["seed"], month=month, scale=options["scale"])
        files = dataset_write(dataset=dataset, out=out)
        self._print_files(files, dataset.invoiced_total())
        if options["files_only"]:
            return

        demo_organisation_ensure(
            finance_password=demo_password(*FINANCE_PASSWORD)[0],
            lead_password=demo_password(*LEAD_PASSWORD)[0],
        )
        # The CoreWeave export has no prices: the contract rate card must exist before it.
        last_day = (month.end - timedelta(days=1)).date()
        coreweave_rates_ensure(
            rates=coreweave_rates(dataset), first=month.start.date(), last=last_day
        )
        verbosity = max(0, options["verbosity"] - 1)
        emails_before = demo_emails_count()
        with demo_mailbox(out=out) as mailbox:
            # --no-attribute / --no-rollup: attribute the month once, after every file is in.
            for file in files:
                self._ingest(file, verbosity)
            self._call("attribute", "--month", month.label, verbosity=verbosity)
            # Budgets sized from the month itself, some crossed; evaluated as of the month's
            # last day, so real alert emails go out (once: a re-run sends nothing new).
            demo_budgets_ensure(month=month.start.date())
            self._call("check_budgets", "--as-of", last_day.isoformat(), verbosity=verbosity)
        self._print_emails(demo_emails_count() - emails_before, mailbox)
        self._print_summary(month, time.monotonic() - began)

    def _ingest(self, file: DemoFile, verbosity: int) -> None:
        path = str(file.path)
        if file.kind == "billing":
            self._call(
                "ingest_billing", "--format", file.format, path, "--source", file.source,
                "--no-attribute", verbosity=verbosity,
            )  # fmt: skip
        elif file.kind == "jobs":
            zone = ["--time-zone", file.time_zone] if file.format == "slurm" else []
            self._call(
                "ingest_jobs", "--format", file.format, path, "--cluster", file.source, *zone,
                "--no-attribute", verbosity=verbosity,
            )  # fmt: skip
        else:
            self._call(
                "ingest_inference", "--format", file.format, path, "--cluster", file.source,
                "--no-rollup", verbosity=verbosity,
            )  # fmt: skip

    def _call(self, name: str, *args: str, verbosity: int) -> None:
        try:
            call_command(name, *args, verbosity=verbosity, stdout=self.stdout, stderr=self.stderr)
        except CommandError as exc:
            raise CommandError(f"demo: `{name} {' '.join(args)}` failed: {exc}") from exc

    def _print_files(self, files: list[DemoFile], invoiced: object) -> None:
        units = {"billing": "rows", "jobs": "jobs", "inference": "samples"}
        for file in files:
            unit = "pods" if file.format == "kubernetes" else units[file.kind]
            self.stdout.write(f"wrote {file.format:<13} {file.path} ({file.rows} {unit})")
        self.stdout.write(f"bills at list/contract prices (FOCUS BilledCost): {invoiced} USD")

    def _print_summary(self, month: Month, seconds: float) -> None:
        summary = demo_summary(month=month, clusters=[c.cluster for c in CLOUDS])
        categories = summary.by_category
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Demo month {month.label} ready in {seconds:.0f} s"))
        lines = [
            f"line items:                     {summary.line_items}",
            f"jobs:                           {summary.jobs}",
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
                f"  {b.provider} {b.account} {b.currency}: amortised cost {b.effective:,.2f}, "
                f"difference {b.difference:f}"
                for b in demo_reconciliation(month=month)
            ),
            "endpoints (month):",
            *(
                f"  {e.endpoint:<18} {e.cost:>12,.2f} {e.currency}  {e.requests:>12,} requests"
                f"  {self._unit(e.per_1k_requests)} per 1k requests"
                f"  {self._unit(e.per_1m_tokens)} per 1M tokens"
                for e in demo_endpoints(month=month)[:TOP_ENDPOINTS]
            ),
            "",
            f"Open {demo_url()} and log in as:",
            f"  finance: {FINANCE_USERNAME} ({demo_password(*FINANCE_PASSWORD)[1]})",
            f"  team lead (language, speech): {LEAD_USERNAME} ({demo_password(*LEAD_PASSWORD)[1]})",
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
    def _unit(value: Decimal | None) -> str:
        return "n/a" if value is None else f"{value:,.4f}"
