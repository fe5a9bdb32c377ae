"""What a chat or webhook message says, and its JSON body per channel kind.

Features describe the fact once (ChannelMessage: a title, a sentence, the figures each with its
currency, a link to the page); this module writes it as Slack's incoming-webhook body (mrkdwn
text), as a Microsoft Teams workflow body (an Adaptive Card in a message) or as a plain JSON
object for a generic webhook (money as decimal strings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypedDict

CENT = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    amount: Decimal
    currency: str
    estimate: bool = False

    def cents(self) -> str:
        """The amount to the cent as a decimal string ("1104.11"), never an exponent."""
        return format(self.amount.quantize(CENT, rounding=ROUND_HALF_UP), "f")

    def text(self) -> str:
        """E.g. "1,104.11 USD (estimate)": cents, thousands separators, never an exponent."""
        money = f"{self.amount.quantize(CENT, rounding=ROUND_HALF_UP):,.2f} {self.currency}"
        return f"{money} (estimate)" if self.estimate else money


@dataclass(frozen=True, slots=True)
class ChannelMessage:
    event: str  # NotificationChannel.Event: budget, anomaly, close
    # The fact it reports, unique for ever (e.g. the budget alert email's key): with the
    # channel's id, the outbox key that makes it go out once per channel.
    key: str
    team_id: int | None
    team_slug: str | None
    title: str
    summary: str
    url: str
    figures: list[Figure] = field(default_factory=list)
    # Whether the organisation's channels take it too (a team's statement: no, they get the
    # close's own message instead).
    organisation_too: bool = True


class FigureBody(TypedDict):
    label: str
    amount: str
    currency: str
    estimate: bool


class WebhookBody(TypedDict):
    event: str
    key: str
    team: str | None
    title: str
    summary: str
    url: str
    figures: list[FigureBody]


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(message: ChannelMessage) -> dict[str, Any]:
    lines = [f"*{_slack_escape(message.title)}*", _slack_escape(message.summary)]
    lines += [f"• {_slack_escape(f.label)}: {f.text()}" for f in message.figures]
    lines.append(f"<{message.url}|Open in GPU FinOps>")
    return {"text": "\n".join(lines)}


def teams_body(message: ChannelMessage) -> dict[str, Any]:
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {"type": "TextBlock", "text": message.title, "weight": "Bolder", "wrap": True},
            {"type": "TextBlock", "text": message.summary, "wrap": True},
            {
                "type": "FactSet",
                "facts": [{"title": f.label, "value": f.text()} for f in message.figures],
            },
        ],
        "actions": [{"type": "Action.OpenUrl", "title": "Open in GPU FinOps", "url": message.url}],
    }
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "content": card}
        ],
    }


def webhook_body(message: ChannelMessage) -> WebhookBody:
    return {
        "event": message.event,
        "key": message.key,
        "team": message.team_slug,
        "title": message.title,
        "summary": message.summary,
        "url": message.url,
        "figures": [
            {
                "label": f.label,
                "amount": f.cents(),
                "currency": f.currency,
                "estimate": f.estimate,
            }
            for f in message.figures
        ],
    }


def channel_body(*, kind: str, message: ChannelMessage) -> Any:
    """The JSON body a channel of `kind` (slack, teams, webhook) is posted."""
    if kind == "slack":
        return slack_body(message)
    if kind == "teams":
        return teams_body(message)
    return webhook_body(message)
