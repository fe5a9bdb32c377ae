"""`manage.py check_budgets [--as-of YYYY-MM-DD]`: evaluate every active budget, send due alerts
once, print each budget's actual, forecast and the alerts it sent."""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from finops.budgets.services import budgets_evaluate_active


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"--as-of must be YYYY-MM-DD, not {text!r}") from exc


class Command(BaseCommand):
    help = "Evaluate every active budget on a day (default today) and send the alerts due."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--as-of", type=_day, default=None, help="YYYY-MM-DD (default today)")

    def handle(self, *args: Any, **options: Any) -> None:
        as_of: date = options["as_of"] or timezone.now().date()
        evaluations = budgets_evaluate_active(as_of=as_of)
        for e in evaluations:
            s = e.status
            b = s.budget
            head = f"{b.name} [{b.scope_label}] {s.period.start}..{s.period.end} as of {as_of}"
            if s.error:
                self.stdout.write(self.style.ERROR(f"{head}: {s.error}"))
                continue
            self.stdout.write(
                f"{head}: actual {s.actual:,.2f} {b.currency} ({s.percent_used} %), "
                f"forecast {s.forecast:,.2f} {b.currency} "
                f"(p10 {s.forecast_low:,.2f}, p90 {s.forecast_high:,.2f}) "
                f"of {b.amount:,.2f} {b.currency}"
            )
            for alert in e.sent:
                crossed = f"crossed on {alert.crossed_on}"
                self.stdout.write(f"  alert sent: {alert.kind} {alert.threshold} % ({crossed})")
        sent = sum(len(e.sent) for e in evaluations)
        self.stdout.write(f"{len(evaluations)} budgets, {sent} alerts sent")
