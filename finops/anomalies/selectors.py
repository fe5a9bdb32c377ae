"""Reads of anomalies for pages, the API and emails (never the ledger: see series.py, whose
endpoint usage an endpoint anomaly's page reads to state its figures per 1,000 requests)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet

from finops.anomalies.models import Anomaly
from finops.anomalies.series import endpoint_days
from finops.org.models import Team
from finops.org.permissions import user_is_finance
from finops.org.selectors import team_list_visible


def anomaly_list_visible(*, user: Any) -> QuerySet[Anomaly]:
    """Finance sees every anomaly (also those of no team: cluster idle); a lead their teams'."""
    queryset = Anomaly.objects.select_related("team").prefetch_related("drivers")
    if user_is_finance(user):
        return queryset
    return queryset.filter(team__in=team_list_visible(user=user))


def anomaly_list_filtered(
    queryset: QuerySet[Anomaly],
    *,
    team: str | None = None,
    status: str | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
    severity: str | None = None,
    min_impact: Decimal | None = None,
) -> QuerySet[Anomaly]:
    """since/until: anomalies whose days overlap [since, until]. status "open": new or
    acknowledged."""
    if team:
        queryset = queryset.filter(team__slug=team)
    if status == "open":
        queryset = queryset.filter(status__in=Anomaly.OPEN_STATUSES)
    elif status:
        queryset = queryset.filter(status=status)
    if since:
        queryset = queryset.filter(last_day__gte=since)
    if until:
        queryset = queryset.filter(first_day__lte=until)
    if severity:
        queryset = queryset.filter(severity=severity)
    if min_impact is not None:
        # Money is text on SQLite, where SQL compares it as text: filter exactly in Python
        # (the lists are small: anomalies, not ledger rows).
        ids = [pk for pk, impact in queryset.values_list("pk", "impact") if impact >= min_impact]
        queryset = queryset.filter(pk__in=ids)
    return queryset


def open_anomaly_counts(*, teams: QuerySet[Team], include_unowned: bool) -> dict[int | None, int]:
    """Open anomalies per team id (None: those of no team, when included)."""
    condition = Q(team__in=teams)
    if include_unowned:
        condition |= Q(team__isnull=True)
    counts: dict[int | None, int] = {}
    rows = Anomaly.objects.filter(condition, status__in=Anomaly.OPEN_STATUSES).values_list(
        "team_id", flat=True
    )
    for team_id in rows:
        counts[team_id] = counts.get(team_id, 0) + 1
    return counts


@dataclass(frozen=True, slots=True)
class RateFigures:
    """An endpoint anomaly's actual and expected cost per 1,000 requests over its event."""

    requests: int
    actual: Decimal
    expected: Decimal


def anomaly_rate_figures(*, anomaly: Anomaly) -> RateFigures | None:
    """For a cost-per-1,000-requests anomaly, its money totals over the event divided by the
    event's thousands of requests (the detector weighs each day by requests / 1,000, so these
    are the request-weighted means of the series). None for other series or no requests."""
    if anomaly.series_kind != Anomaly.Series.ENDPOINT:
        return None
    days = endpoint_days(first_day=anomaly.first_day, last_day=anomaly.last_day)
    requests = sum(d.requests for d in days.get(anomaly.series_key, {}).values() if d.requests > 0)
    if requests <= 0:
        return None
    thousands = Decimal(requests) / 1000
    return RateFigures(requests, anomaly.actual / thousands, anomaly.expected / thousands)


@dataclass(frozen=True, slots=True)
class ShareFigures:
    """A cluster idle-share anomaly in its series' unit: the event's idle share of the
    cluster's GPU node cost, actual and expected (0..1), and their difference; the idle cost
    above expected (the anomaly's impact, money) is shown beside it, labelled as money."""

    actual: Decimal
    expected: Decimal
    base: Decimal

    @property
    def points(self) -> Decimal:
        """Percentage points above the expected share."""
        return (self.actual - self.expected) * 100


def anomaly_share_figures(*, anomaly: Anomaly) -> ShareFigures | None:
    """For a cluster idle-share anomaly, its idle cost totals over the GPU node cost they are
    a share of (the detector weighs each day by that cost, so these are the cost-weighted
    means of the series). None for other series, or a row stored before share_base was."""
    if anomaly.series_kind != Anomaly.Series.CLUSTER_IDLE or not anomaly.share_base:
        return None
    base = anomaly.share_base
    return ShareFigures(anomaly.actual / base, anomaly.expected / base, base)
