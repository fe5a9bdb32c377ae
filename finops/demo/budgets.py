"""Demo budgets: one monthly budget per team, sized from the demo month's own ledger so that
some are crossed (over, or past 80 %) and some are comfortable, plus one for the organisation.
Idempotent: re-running updates the amounts in place; alerts already sent are never resent."""

from __future__ import annotations

from datetime import date
from decimal import ROUND_CEILING, Decimal

from django.conf import settings
from django.db import transaction

from finops.attribution.models import TeamDailyCost
from finops.budgets.models import Budget
from finops.core.money import MoneySum
from finops.org.models import Team

# Budget = this share of the team's month (teams alphabetically): < 1 is crossed.
FACTORS = (Decimal("0.85"), Decimal("1.15"), Decimal("1.6"), Decimal("0.95"), Decimal("2.5"))
ORG_FACTOR = Decimal("1.1")
HUNDRED = Decimal(100)


def _round_up(amount: Decimal) -> Decimal:
    return max((amount / HUNDRED).to_integral_value(rounding=ROUND_CEILING) * HUNDRED, HUNDRED)


def demo_budgets_ensure(*, month: date) -> list[Budget]:
    """A monthly budget per team with cost in the month (reporting-currency rows), and one for
    the organisation; recipients are the team's leads (the demo lead) and a listed address."""
    currency = settings.FINOPS_REPORTING_CURRENCY
    rows = (
        TeamDailyCost.objects.filter(billing_period=month.replace(day=1), billing_currency=currency)
        .order_by()
        .values("team_id")
        .annotate(total=MoneySum("amount"))
    )
    totals = {r["team_id"]: r["total"] for r in rows}
    budgets = []
    common = {"period": Budget.Period.MONTH, "currency": currency, "active": True,
              "thresholds": [50, 80, 100], "forecast_thresholds": [100]}  # fmt: skip
    with transaction.atomic():
        for i, team in enumerate(Team.objects.filter(pk__in=totals).order_by("slug")):
            amount = _round_up(totals[team.pk] * FACTORS[i % len(FACTORS)])
            budget, _ = Budget.objects.update_or_create(
                name=f"{team.name} monthly",
                defaults={
                    **common,
                    "team": team,
                    "amount": amount,
                    "recipients": [f"{team.slug}-finops@example.com"],
                },
            )
            budgets.append(budget)
        org = _round_up(sum(totals.values(), Decimal(0)) * ORG_FACTOR)
        budget, _ = Budget.objects.update_or_create(
            name="Organisation monthly",
            defaults={**common, "team": None, "amount": org, "recipients": ["finance@example.com"]},
        )
        budgets.append(budget)
    return budgets
