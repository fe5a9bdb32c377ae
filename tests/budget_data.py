"""Ledger rows for the budget tests: a daily series per team, as attribution's rollups hold it."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

from django.core.management import call_command

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


# The daily FOCUS month of the budget alert tests (and the chat channel tests).
SEPTEMBER = date(2025, 9, 1)
COLUMNS = [
    "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
    "BillingAccountId", "ProviderName", "ChargeCategory", "PricingCategory", "ServiceName",
    "SkuId", "ResourceId", "ResourceName", "BilledCost", "EffectiveCost", "BillingCurrency",
    "Tags",
]  # fmt: skip


def focus_month_daily(path: Path, daily: dict[int, str]) -> Path:
    """One Usage line per day of September 2025 tagged team=vision, EffectiveCost as given."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for dom, cost in sorted(daily.items()):
        day = SEPTEMBER + timedelta(days=dom - 1)
        writer.writerow({
            "BillingPeriodStart": "2025-09-01T00:00:00Z",
            "BillingPeriodEnd": "2025-10-01T00:00:00Z",
            "ChargePeriodStart": f"{day}T00:00:00Z",
            "ChargePeriodEnd": f"{day + timedelta(days=1)}T00:00:00Z",
            "BillingAccountId": "123456789012", "ProviderName": "AWS",
            "ChargeCategory": "Usage", "PricingCategory": "Standard",
            "ServiceName": "Amazon SageMaker", "SkuId": "SKU1", "ResourceId": f"r-{dom}",
            "ResourceName": f"notebook-{dom}", "BilledCost": cost, "EffectiveCost": cost,
            "BillingCurrency": "USD", "Tags": '{"team": "vision"}',
        })  # fmt: skip
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def ingest_focus(path: Path) -> None:
    # ingest_billing attributes the months it touched.
    call_command("ingest_billing", "--format", "focus", str(path), "--source", "aws",
                 stdout=io.StringIO())  # fmt: skip
