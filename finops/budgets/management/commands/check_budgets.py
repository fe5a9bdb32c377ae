"""`manage.py check_budgets [--as-of YYYY-MM-DD]`: evaluate every active budget, send due alerts
once, print each budget's actual, forecast and what became of each alert's email: sent (the
SMTP server accepted it), queued (a worker sends it), failed (with the error; the command then
exits non-zero) or none (nobody to send it to). Never "sent" for an email that did not go."""

from __future__ import annotations

from argparse import ArgumentParser
from collections import Counter
from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from finops.budgets.services import budgets_evaluate_active
from finops.core.wording import counted
from finops.notifications.models import EmailNotification


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
        # Read after the evaluations committed: an eager send has happened by now.
        ids = [a.notification_id for e in evaluations for a in e.sent if a.notification_id]
        emails = EmailNotification.objects.in_bulk(ids)
        outcomes: Counter[str] = Counter()
        for e in evaluations:
            s = e.status
            b = s.budget
            head = f"{b.name} [{b.scope_label}] {s.period.start}..{s.period.end} as of {as_of}"
            if s.error:
                self.stdout.write(self.style.ERROR(f"{head}: {s.error}"))
                continue
            self.stdout.write(
                f"{head}: actual {s.actual:,.2f} {b.currency} ({s.percent_used} %), "
                f"forecast {s.forecast:,.2f} {b.currency}, an estimate "
                f"(p10 {s.forecast_low:,.2f} {b.currency} to p90 {s.forecast_high:,.2f} "
                f"{b.currency}) "
                f"of {b.amount:,.2f} {b.currency}"
            )
            for alert in e.sent:
                what = f"{alert.kind} {alert.threshold} %"
                crossed = f"(crossed on {alert.crossed_on})"
                email = emails.get(alert.notification_id) if alert.notification_id else None
                if email is None:
                    outcomes["without recipients"] += 1
                    self.stdout.write(
                        f"  alert raised, no email: {what} (nobody to send it to) {crossed}"
                    )
                elif email.status == EmailNotification.Status.SENT:
                    outcomes["sent"] += 1
                    self.stdout.write(f"  alert sent: {what} {crossed}")
                elif email.status == EmailNotification.Status.FAILED:
                    outcomes["failed"] += 1
                    self.stdout.write(
                        self.style.ERROR(
                            f"  alert email FAILED: {what}: {email.last_error} {crossed}"
                        )
                    )
                else:
                    outcomes["queued"] += 1
                    self.stdout.write(f"  alert queued: {what} {crossed} (a worker sends it)")
        counts = ", ".join(
            f"{outcomes[k]} {k}" for k in ("sent", "queued", "failed", "without recipients")
        )
        self.stdout.write(f"{counted(len(evaluations), 'budget')}, alerts: {counts}")
        if outcomes["failed"]:
            raise CommandError(
                f"{counted(outcomes['failed'], 'alert email')} failed (see above); the outbox "
                "retries what a retry can fix"
            )
