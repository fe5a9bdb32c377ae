"""Reads: who gets a month's statement by email, and, once the month is closed, who got one
(the outbox rows the close enqueued) and who did not (a team with no lead with an email)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from finops.attribution.models import TeamDailyCost
from finops.chargeback.models import ClosedPeriod
from finops.chargeback.selectors import team_lead_emails
from finops.core.months import month_format
from finops.notifications.models import EmailNotification
from finops.org.models import Team


@dataclass(frozen=True)
class StatementRecipient:
    team: Team
    # The addresses its statement goes (or went) to; empty: no statement email.
    emails: list[str]
    # After a close: the outbox status of its email (pending, sending, sent, failed), "" before
    # the close or when no email was enqueued.
    outbox_status: str = ""

    @property
    def gets_email(self) -> bool:
        return bool(self.emails)


def teams_with_cost(*, month: date) -> list[Team]:
    """Teams with ledger cost in the billing month: the teams that get a statement."""
    ids = TeamDailyCost.objects.filter(billing_period=month, team__isnull=False).values("team_id")
    return list(Team.objects.filter(id__in=ids).order_by("name", "slug"))


def statement_recipients(
    *, month: date, close: ClosedPeriod | None = None
) -> list[StatementRecipient]:
    """Each team with cost in the month and where its statement email goes: before the close,
    its leads' addresses now; after it (`close`), the recipients of the email the close put
    in the outbox, with that email's status."""
    teams = teams_with_cost(month=month)
    if close is None:
        return [StatementRecipient(team=t, emails=team_lead_emails(team=t)) for t in teams]
    suffix = f":{month_format(month)}:{close.pk}"
    emails = {
        n.key.removeprefix("statement:").removesuffix(suffix): n
        for n in EmailNotification.objects.filter(
            kind="statement", key__startswith="statement:", key__endswith=suffix
        )
    }
    result = []
    for team in teams:
        sent = emails.get(team.slug)
        result.append(
            StatementRecipient(
                team=team,
                emails=list(sent.recipients) if sent is not None else [],
                outbox_status=sent.status if sent is not None else "",
            )
        )
    return result
