"""manage.py detect_anomalies [--since YYYY-MM-DD]: re-evaluate anomalies from that day."""

from __future__ import annotations

import datetime as dt
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from finops.anomalies.services import anomalies_detect


class Command(BaseCommand):
    help = "(Re)evaluate anomalies from a day (default: the last 35 days of the ledger)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--since", help="YYYY-MM-DD")

    def handle(self, *args: Any, **options: Any) -> None:
        since = None
        if options["since"]:
            try:
                since = dt.date.fromisoformat(options["since"])
            except ValueError as exc:
                raise CommandError("--since must be YYYY-MM-DD") from exc
        summary = anomalies_detect(since=since)
        self.stdout.write(
            f"anomalies from {summary.since}: {summary.created} new, {summary.updated} updated, "
            f"{summary.deleted} removed, {summary.unchanged} unchanged"
        )
