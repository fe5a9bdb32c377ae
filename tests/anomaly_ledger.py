"""A hand-made ledger for the anomaly tests: one team, 40 days of one training run at about
1,000 USD a day (+-3 %, a 5-day pattern), and a second run costing 3,000 USD on one day."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from finops.attribution.models import AllocatedCost, Category
from finops.org.models import Team

START = dt.date(2025, 8, 1)
DAYS = 40
SPIKE_DAY = START + dt.timedelta(days=35)
WIGGLE = [Decimal("1.00"), Decimal("1.03"), Decimal("0.98"), Decimal("1.02"), Decimal("0.97")]
BASE = Decimal("1000.123456789012")
SPIKE = Decimal("3000")


def row(team: Team | None, day: dt.date, amount: Decimal, **fields: object) -> AllocatedCost:
    values: dict[str, object] = {
        "billing_period": day.replace(day=1), "day": day, "category": Category.TRAINING,
        "team": team, "provider_name": "AWS", "service_name": "Amazon EC2",
        "billing_currency": "USD", "amount": amount,
    }  # fmt: skip
    values.update(fields)
    return AllocatedCost.objects.create(**values)


def build(team: Team, *, spike: Decimal | None = SPIKE) -> AllocatedCost | None:
    for i in range(DAYS):
        day = START + dt.timedelta(days=i)
        row(team, day, BASE * WIGGLE[i % 5], run_id="run-a")
    if spike is None:
        return None
    return row(team, SPIKE_DAY, spike, run_id="run-b")


def day_total(team: Team, day: dt.date) -> Decimal:
    return sum((r.amount for r in AllocatedCost.objects.filter(team=team, day=day)), Decimal(0))
