"""Reads for inference endpoints (the API and pages read through these)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet

from billing_ingest.models import ImportBatch
from finops.core.months import month_from_label, month_next
from finops.inference.models import EndpointCost, InferenceUsage
from finops.inference.services import unit_cost
from finops.org.models import Team


def endpoint_costs(
    *,
    month: dt.date,
    endpoint: str | None = None,
    teams: QuerySet[Team] | None = None,
    include_unowned: bool = True,
) -> QuerySet[EndpointCost]:
    """The month's EndpointCost rows (one per endpoint, team, day and currency); with `teams`,
    only those teams' rows, and the rows of pods no team owns only with include_unowned."""
    rows = EndpointCost.objects.filter(billing_period=month.replace(day=1))
    if endpoint is not None:
        rows = rows.filter(endpoint=endpoint)
    if teams is not None:
        condition = Q(team__in=teams)
        if include_unowned:
            condition |= Q(team__isnull=True)
        rows = rows.filter(condition)
    return rows


@dataclass(frozen=True, slots=True)
class EndpointMonth:
    """One team's part of an endpoint over a month in one currency. node_cost and
    node_idle_cost are None unless asked for (they include other teams' cost: finance only)."""

    endpoint: str
    team: Team | None
    currency: str
    cost: Decimal
    gpu_seconds: Decimal
    requests: int
    tokens: int
    node_cost: Decimal | None
    node_idle_cost: Decimal | None

    @property
    def cost_per_1k_requests(self) -> Decimal | None:
        return unit_cost(self.cost, self.requests, 1000)

    @property
    def cost_per_1m_tokens(self) -> Decimal | None:
        return unit_cost(self.cost, self.tokens, 1_000_000)

    @property
    def idle_share(self) -> Decimal | None:
        if self.node_cost is None or self.node_idle_cost is None or not self.node_cost:
            return None
        return self.node_idle_cost / self.node_cost


def endpoint_month_rows(rows: Iterable[EndpointCost], *, capacity: bool) -> list[EndpointMonth]:
    """Day rows (with their team selected) summed per endpoint, team and currency; unit costs
    are month cost / month usage (not an average of daily ratios). Summed in Python: exact on
    both databases. capacity: fill node_cost / node_idle_cost (finance only)."""
    sums: dict[tuple[str, int | None, str], list[Any]] = {}
    teams: dict[int | None, Team | None] = {None: None}
    zero = Decimal(0)
    for row in rows:
        teams.setdefault(row.team_id, row.team)
        key = (row.endpoint, row.team_id, row.billing_currency)
        acc = sums.setdefault(key, [zero, zero, 0, 0, zero, zero])
        for i, value in enumerate((row.cost, row.gpu_seconds, row.requests, row.tokens,
                                   row.node_cost, row.node_idle_cost)):  # fmt: skip
            acc[i] += value
    result = []
    for (endpoint, team_id, currency), values in sums.items():
        node = (values[4], values[5]) if capacity else (None, None)
        result.append(EndpointMonth(endpoint, teams[team_id], currency, *values[:4], *node))
    # Per endpoint: named teams alphabetically, no team last; the default currency first.
    return sorted(
        result,
        key=lambda t: (
            t.endpoint,
            t.team is None,
            t.team.name if t.team else "",
            t.currency,
        ),
    )


def endpoint_month_totals(
    *,
    month: dt.date,
    teams: QuerySet[Team] | None = None,
    include_unowned: bool = True,
    team_slug: str | None = None,
    capacity: bool = True,
) -> list[EndpointMonth]:
    """Per endpoint, team and currency over the month (see endpoint_month_rows); with
    `teams` / `team_slug` only those teams' parts."""
    rows = endpoint_costs(month=month, teams=teams, include_unowned=include_unowned)
    if team_slug is not None:
        rows = rows.filter(team__slug=team_slug)
    return endpoint_month_rows(rows.select_related("team").order_by(), capacity=capacity)


def usage_without_cost(*, month: dt.date) -> list[tuple[dt.date, str]]:
    """(day, endpoint) in the calendar month with usage but no EndpointCost row: pods without
    the `finops.io/endpoint` label, or an endpoint name that differs between metrics and pods."""
    first = month.replace(day=1)
    start = dt.datetime.combine(first, dt.time(), dt.UTC)
    end = dt.datetime.combine(month_next(first), dt.time(), dt.UTC)
    used = {
        (at.astimezone(dt.UTC).date(), endpoint)
        for at, endpoint in InferenceUsage.objects.filter(
            window_start__gte=start, window_start__lt=end
        ).values_list("window_start", "endpoint")
    }
    costed = set(EndpointCost.objects.values_list("day", "endpoint"))
    return sorted(used - costed)


def batch_usage_months(*, batch_id: int) -> list[dt.date]:
    """First days of the months a succeeded usage batch has windows in."""
    periods = (
        ImportBatch.objects.filter(id=batch_id).values_list("billing_periods", flat=True).first()
    )
    return [month_from_label(text) for text in periods or []]
