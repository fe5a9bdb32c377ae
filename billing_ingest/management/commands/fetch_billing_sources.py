"""`manage.py fetch_billing_sources [--name NAME]`: fetch billing sources now, as the 6-hourly
schedule does (the same task), and print what each fetch did. Without --name: every enabled
source, one after the other."""

from __future__ import annotations

from typing import Any

from celery.exceptions import Retry
from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing_ingest.models import BillingSource
from billing_ingest.services.sources import FETCH_TIME_LIMIT
from billing_ingest.tasks.sources import fetch_billing_source


class Command(BaseCommand):
    help = "Fetch billing sources now (all enabled ones, or --name) and import what is new."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", help="the billing source to fetch (default: every enabled)")
        parser.add_argument(
            "--force",
            action="store_true",
            help="download every delivery, even those whose version was imported already",
        )
        parser.add_argument(
            "--timeout", type=float, default=float(FETCH_TIME_LIMIT), help="seconds to wait"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        sources = BillingSource.objects.filter(enabled=True)
        if options["name"]:
            sources = BillingSource.objects.filter(name=options["name"])
            if not sources.exists():
                raise CommandError(f"no billing source named {options['name']!r}")
        failed = [
            source.name
            for source in sources.order_by("name")
            if not self._fetch(source, timeout=options["timeout"], force=options["force"])
        ]
        if failed:
            raise CommandError(f"fetch failed: {', '.join(failed)}")

    def _fetch(self, source: BillingSource, *, timeout: float, force: bool) -> bool:
        try:
            result = fetch_billing_source.delay(source.pk, force=force).get(timeout=timeout)
        except CeleryTimeoutError:
            self.stderr.write(f"{source.name}: still fetching after {timeout:.0f}s")
            return False
        except Retry as exc:
            # Eager (no broker) and propagating: the retry is not run in-process.
            self.stderr.write(f"{source.name}: {exc.exc}; a transient error, try again later")
            return False
        line = f"{source.name}: {result['status']}: {result['message']}"
        if result["status"] == BillingSource.Status.FAILED:
            self.stderr.write(line)
            return False
        self.stdout.write(line)
        return True
