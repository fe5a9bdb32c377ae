"""Reads: who receives a budget's alert emails (its team's leads and listed addresses, minus
those who opted out of the budget or of budget emails), and what the pages say when nobody
does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User

from finops.budgets.models import Budget
from finops.notifications.models import NotificationPreference
from finops.notifications.selectors import addresses_not_wanting


def budget_recipients(*, budget: Budget) -> list[str]:
    """The team's leads (with an address) and the listed addresses, minus those opted out."""
    addresses = {a.strip().lower() for a in budget.recipients if a.strip()}
    if budget.team_id:
        leads = User.objects.filter(finops_profile__teams=budget.team_id, is_active=True).exclude(
            email=""
        )
        addresses |= {email.lower() for email in leads.values_list("email", flat=True)}
    opted_out = {
        e.lower()
        for e in User.objects.filter(budgetoptout__budget=budget).values_list("email", flat=True)
    }
    return sorted(addresses - opted_out)


@dataclass(frozen=True)
class RecipientList:
    """Who gets a budget's alerts (`receiving`), and who would but turned budget emails off in
    their email settings (`opted_out`: notification_enqueue drops them when sending)."""

    receiving: list[str]
    opted_out: list[str]


def budget_recipient_list(*, budget: Budget) -> RecipientList:
    addresses = budget_recipients(budget=budget)
    declined = addresses_not_wanting(kind=NotificationPreference.KIND_BUDGET, addresses=addresses)
    return RecipientList([a for a in addresses if a not in declined], sorted(declined))


NO_RECIPIENT = (
    "Nobody receives this budget's alert emails: {why}. Its alerts are still recorded and "
    "shown on its page; add recipients to have them emailed."
)


def budget_no_recipient_warning(*, budget: Budget, receiving: Sequence[str]) -> str:
    """What the pages and the API say of a budget whose alerts go to nobody ("" otherwise)."""
    if receiving:
        return ""
    if budget.team_id:
        why = "no recipient is listed and no lead of the team with an email address receives them"
    else:
        why = "no recipient is listed (an organisation or provider budget has no team leads)"
    return NO_RECIPIENT.format(why=why)
