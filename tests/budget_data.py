"""Ledger rows for the budget tests: a daily series per team, as attribution's rollups hold it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta
from decimal import Decimal

from finops.attribution.models import AllocatedCost, Category, TeamDailyCost
from finops.org.models import Team


def ledger_days(
    *,
    team: Team | None,
    first: date,
    amounts: Iterable[Decimal | int | str],
    provider: str = "AWS",
    currency: str = "USD",
    run_id: str = "run-1",
    service: str = "Amazon Elastic Compute Cloud",
) -> None:
    """One TeamDailyCost and one AllocatedCost row per day from `first`, amounts in order."""
    for offset, amount in enumerate(amounts):
        day = first + timedelta(days=offset)
        common = {
            "billing_period": day.replace(day=1),
            "day": day,
            "team": team,
            "category": Category.TRAINING if team else Category.UNALLOCATED,
            "provider_name": provider,
            "billing_currency": currency,
            "amount": Decimal(amount),
        }
        TeamDailyCost.objects.create(**common)
        AllocatedCost.objects.create(**common, run_id=run_id, service_name=service)
