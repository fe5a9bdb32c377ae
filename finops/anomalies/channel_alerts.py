"""A new cost anomaly as a chat/webhook message (issue 33): once per anomaly and channel, with
its money in its currency and a link to the anomaly's page."""

from __future__ import annotations

from finops.anomalies.emails import anomaly_url, subject_for
from finops.anomalies.models import Anomaly
from finops.notifications.channel_messages import ChannelMessage, Figure


def anomaly_channel_message(*, anomaly: Anomaly) -> ChannelMessage:
    owner = anomaly.team.name if anomaly.team else anomaly.series_key or "The organisation"
    days = f"{anomaly.first_day:%Y-%m-%d}"
    if anomaly.last_day != anomaly.first_day:
        days = f"{days} to {anomaly.last_day:%Y-%m-%d}"
    summary = f"{anomaly.kind_label} for {owner}, {days}" + (
        " (still going on)." if anomaly.ongoing else "."
    )
    return ChannelMessage(
        event="anomaly",
        key=f"anomaly:{anomaly.pk}",
        team_id=anomaly.team_id,
        team_slug=anomaly.team.slug if anomaly.team else None,
        title=subject_for(anomaly).removeprefix("[GPU FinOps] "),
        summary=summary,
        url=anomaly_url(anomaly),
        figures=[
            Figure("Impact", anomaly.impact, anomaly.currency),
            Figure("Actual", anomaly.actual, anomaly.currency),
            Figure("Expected", anomaly.expected, anomaly.currency, True),
        ],
    )
