"""Demo budgets: one monthly budget per team, sized from the demo month's own ledger so that
some are crossed (over, or past 80 %) and some are comfortable, plus one for the organisation.
Idempotent: re-running updates the amounts in place; alerts already sent are never resent."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import ROUND_CEILING, Decimal

from django.conf import settings
from django.db import transaction

from finops.attribution.models import TeamDailyCost
from finops.budgets.crossings import ACTUAL, FORECAST, level_of
from finops.budgets.models import Budget, BudgetAlert
from finops.budgets.selectors import BudgetStatus, budget_statuses
from finops.budgets.services import budget_evaluate
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


def _due(status: BudgetStatus, alerted: set[tuple[str, int]]) -> bool:
    """Whether evaluating the budget on status.as_of would raise an alert (a threshold reached,
    actual or forecast, that the period has no alert for yet)."""
    if status.error:
        return False
    budget = status.budget
    for kind, thresholds, value in (
        (ACTUAL, budget.thresholds, status.actual),
        (FORECAST, budget.forecast_thresholds, status.forecast),
    ):
        for threshold in {int(t) for t in thresholds}:
            if (kind, threshold) not in alerted and value >= level_of(budget, threshold):
                return True
    return False


def demo_budgets_replay(*, days: list[date]) -> int:
    """Evaluate every active budget on each day in turn, as a daily check_budgets would have:
    each alert is raised (and its email sent) on the day its threshold was crossed. A budget
    is evaluated on a day when an alert is due, and on the last day of each month (the stored
    evaluation the pages show). Returns how many evaluations ran."""
    budgets = list(Budget.objects.filter(active=True).select_related("team").order_by("id"))
    evaluated = 0
    for day in days:
        month_end = (day + timedelta(days=1)).day == 1
        statuses = budget_statuses(budgets=budgets, as_of=day)
        alerted: dict[tuple[int, date], set[tuple[str, int]]] = defaultdict(set)
        rows = BudgetAlert.objects.filter(
            budget__in=budgets, period_start__in={s.period.start for s in statuses}
        ).values_list("budget_id", "period_start", "kind", "threshold")
        for budget_id, start, kind, threshold in rows:
            alerted[(budget_id, start)].add((str(kind), int(threshold)))
        for budget, status in zip(budgets, statuses, strict=True):
            if month_end or _due(status, alerted[(budget.pk, status.period.start)]):
                budget_evaluate(budget_id=budget.pk, as_of=day)
                evaluated += 1
    return evaluated
