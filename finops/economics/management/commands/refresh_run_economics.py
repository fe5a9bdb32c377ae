"""manage.py refresh_run_economics [--month YYYY-MM]: rebuild the stored run-economics rollup of
a month, or of every month of the ledger (after a migration adds columns to it)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from finops.core.months import month_argument, month_format, month_parse
from finops.economics.services import economics_refresh_months


class Command(BaseCommand):
    help = "Rebuild the RunEconomics rows of a month (default: every month with run rollups)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--month", type=month_argument, help="billing month YYYY-MM")

    def handle(self, *args: Any, **options: Any) -> None:
        months = [month_parse(options["month"])] if options["month"] else None
        for month, summary in economics_refresh_months(months=months):
            self.stdout.write(
                f"{month_format(month)}: {summary['runs']} runs, "
                f"{summary['measured_runs']} with metrics"
            )
