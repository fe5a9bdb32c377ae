"""A budget alert as a chat/webhook message (issue 33): the same fact as the alert email (its
outbox key), the figures with their currency, and a link to the budget's page."""

from __future__ import annotations

from finops.budgets.crossings import Crossing
from finops.budgets.emails import alert_subject, budget_url
from finops.budgets.selectors import BudgetStatus
from finops.notifications.channel_messages import ChannelMessage, Figure


def budget_channel_message(
    *, status: BudgetStatus, crossings: list[Crossing], key: str
) -> ChannelMessage:
    budget = status.budget
    owner = budget.team.name if budget.team else "The organisation"
    crossed = ", ".join(f"{c.kind} {c.threshold} % on {c.crossed_on:%Y-%m-%d}" for c in crossings)
    summary = (
        f"{owner}: {status.percent_used} % of the budget spent as of {status.as_of:%Y-%m-%d} "
        f"(crossed: {crossed})."
    )
    return ChannelMessage(
        event="budget",
        key=key,
        team_id=budget.team_id,
        team_slug=budget.team.slug if budget.team else None,
        title=alert_subject(status=status, crossings=crossings),
        summary=summary,
        url=budget_url(budget.pk),
        figures=[
            Figure("Spent to date (amortised)", status.actual, status.currency),
            Figure("Budget", budget.amount, budget.currency),
            Figure("Forecast at the period's end", status.forecast, status.currency, True),
        ],
    )
