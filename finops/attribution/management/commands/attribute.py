"""`manage.py attribute --month YYYY-MM`: attribute a billing month and show that it adds up."""

from __future__ import annotations

from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from finops.attribution.services import (
    month_category_totals,
    month_conservation,
    parse_month,
)
from finops.attribution.tasks import TIME_LIMIT, attribute_month


def _month(text: str) -> str:
    try:
        return parse_month(text).strftime("%Y-%m")
    except ValueError as exc:
        raise ArgumentTypeError(str(exc)) from None


class Command(BaseCommand):
    help = "Attribute a billing month's cost to teams, runs, idle and unallocated."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--month", required=True, type=_month, help="billing month YYYY-MM")

    def handle(self, *args: Any, **options: Any) -> None:
        month: str = options["month"]
        try:
            result = attribute_month.delay(month).get(timeout=TIME_LIMIT)
        except Exception as exc:
            raise CommandError(f"attribution of {month} failed: {exc}") from exc
        self.stdout.write(
            f"{month}: attribution run {result['attribution_run']} {result['status']}, "
            f"{result['line_items']} line items, {result['jobs']} jobs"
        )
        first = parse_month(month)
        for (currency, category), total in month_category_totals(month=first).items():
            self.stdout.write(f"  {category:<12} {total:>24} {currency}")
        unbalanced = 0
        for (provider, account, currency), sums in month_conservation(month=first).items():
            self.stdout.write(
                f"  conservation {provider or '-'} / {account or '-'} {currency}: "
                f"billed {sums['billed']} allocated {sums['allocated']} "
                f"difference {sums['difference']:f}"
            )
            unbalanced += sums["difference"] != 0
        if unbalanced:
            raise CommandError(f"{unbalanced} provider/account/currency totals do not add up")
        self.stdout.write(self.style.SUCCESS("conservation check: difference 0"))
