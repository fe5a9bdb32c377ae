"""export_focus --month YYYY-MM --out FILE: a billing month's line items as a FOCUS 1.2 file.

Thin: validate arguments, call the export service, print what was written. The file is written
here, by this process (not by a worker, whose file system may be another machine's); the
export_focus_month task is the same export for schedules and workers.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from finops.core.months import month_argument, month_parse
from finops.exports.writer import (
    focus_export_format,
    focus_month_export,
)


class Command(BaseCommand):
    help = (
        "Write the line items of a billing month (the month of their BillingPeriodStart) as a "
        "FOCUS 1.2 file: Parquet or CSV by the file name's suffix. A month without line items "
        "gives a file with the header and no rows."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--month", required=True, type=month_argument, help="billing month YYYY-MM"
        )
        parser.add_argument(
            "--out", required=True, type=Path, help="output file, .parquet or .csv (replaced)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        out: Path = options["out"]
        try:
            focus_export_format(out)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not out.parent.is_dir():
            raise CommandError(f"{out.parent} is not a folder")
        result = focus_month_export(month=month_parse(options["month"]), out=out)
        self.stdout.write(
            f"{out}: FOCUS 1.2 {result.file_format}, {result.rows} rows of billing month "
            f"{options['month']}"
        )
        if result.rows == 0:
            self.stdout.write(f"  no line items have billing month {options['month']}")
        for currency in sorted(result.invoiced):
            self.stdout.write(
                f"  {currency}: BilledCost {result.invoiced[currency]} {currency}, "
                f"EffectiveCost {result.effective[currency]} {currency}"
            )
        if result.digit_id_rows:
            self.stdout.write(
                f"  note: {result.digit_id_rows} rows have an all-digit BillingAccountId or "
                "SubAccountId; they are written quoted, as text, leading zeros kept. Readers "
                "that guess CSV types from the characters (focus-validator 2.2.1, polars, "
                "pandas) still read them as integers and report 'MUST be of type VARCHAR': "
                "export .parquet where the types must travel with the file."
            )
