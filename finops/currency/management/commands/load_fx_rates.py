"""`manage.py load_fx_rates PATH`: load FX rates from `date,from,to,rate` or the ECB history."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any, cast

from django.core.management.base import BaseCommand, CommandError

from finops.currency.services import FxRateFileError
from finops.currency.tasks import TIME_LIMIT, load_fx_rates


class Command(BaseCommand):
    help = (
        "Load FX rates from a CSV: 'date,from,to,rate' rows, or the ECB's eurofxref-hist.csv "
        "(or .zip), rates per EUR. Re-loading a date and pair replaces its rate."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("path", help="CSV file (or the ECB zip)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = load_fx_rates.delay(str(options["path"])).get(timeout=TIME_LIMIT)
        except FxRateFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{result['rows']} rates ({result['layout']}) from {result['first_date']} "
            f"to {result['last_date']}: {', '.join(cast(list[str], result['currencies']))}"
        )
