"""A month close as chat/webhook messages (issue 33): each team's channels get their team's
final statement (total in the reporting currency, native totals, a link to the statement);
the organisation's channels get one message for the close (every team's total)."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from finops.chargeback.models import ClosedPeriod
from finops.chargeback.selectors import Statement
from finops.core.months import month_format
from finops.notifications.channel_messages import ChannelMessage, Figure


def statement_channel_message(*, statement: Statement, close: ClosedPeriod) -> ChannelMessage:
    team, month = statement.team, statement.month
    url = settings.SITE_URL + reverse("web:statement", args=[team.slug, month_format(month)])
    figures = [
        Figure(f"Charged ({n.currency})", n.amount, n.currency) for n in statement.total_native
    ]
    if statement.total_reporting is not None:
        figures.insert(0, Figure("Total charged", statement.total_reporting, statement.currency))
    return ChannelMessage(
        event="close",
        key=f"statement:{team.slug}:{month_format(month)}:{close.pk}",
        team_id=team.pk,
        team_slug=team.slug,
        title=f"Chargeback statement {team.name} · {month:%B %Y} (closed)",
        summary=(
            f"Finance closed {month:%B %Y}: the statement of {team.name} is final. Later changes "
            "to this month's bills appear as adjustments in the next open month."
        ),
        url=url,
        figures=figures,
        organisation_too=False,
    )


def close_channel_message(*, statements: list[Statement], close: ClosedPeriod) -> ChannelMessage:
    month = close.month
    figures = [
        Figure(s.team.name, s.total_reporting, s.currency)
        for s in statements
        if s.total_reporting is not None
    ]
    missing = [s.team.name for s in statements if s.total_reporting is None]
    summary = f"Finance closed {month:%B %Y}: {len(statements)} team statements are final."
    if missing:
        summary += f" Not converted to {close.currency} (no FX rate): {', '.join(missing)}."
    return ChannelMessage(
        event="close",
        key=f"close:{month_format(month)}:{close.pk}",
        team_id=None,
        team_slug=None,
        title=f"{month:%B %Y} closed",
        summary=summary,
        url=settings.SITE_URL + reverse("web:close"),
        figures=figures,
    )
