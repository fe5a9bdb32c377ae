"""Reads for inference endpoints (the API and pages read through these)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import QuerySet

from billing_ingest.models import ImportBatch
from finops.inference.models import EndpointCost, InferenceUsage
from finops.inference.services import unit_cost


def endpoint_costs(*, month: dt.date, endpoint: str | None = None) -> QuerySet[EndpointCost]:
    rows = EndpointCost.objects.filter(billing_period=month.replace(day=1))
    if endpoint is not None:
        rows = rows.filter(endpoint=endpoint)
    return rows


@dataclass(frozen=True, slots=True)
class EndpointMonth:
    endpoint: str
    currency: str
    cost: Decimal
    gpu_seconds: Decimal
    requests: int
    tokens: int
    node_cost: Decimal
    node_idle_cost: Decimal

    @property
    def cost_per_1k_requests(self) -> Decimal | None:
        return unit_cost(self.cost, self.requests, 1000)

    @property
    def cost_per_1m_tokens(self) -> Decimal | None:
        return unit_cost(self.cost, self.tokens, 1_000_000)

    @property
    def idle_share(self) -> Decimal | None:
        return self.node_idle_cost / self.node_cost if self.node_cost else None


def endpoint_month_totals(*, month: dt.date) -> list[EndpointMonth]:
    """Per endpoint and currency over the month; unit costs are month cost / month usage (not
    an average of daily ratios). Summed in Python: exact on both databases."""
    sums: dict[tuple[str, str], list[Decimal | int]] = {}
    zero = Decimal(0)
    for row in endpoint_costs(month=month).order_by("endpoint", "billing_currency", "day"):
        acc = sums.setdefault((row.endpoint, row.billing_currency), [zero, zero, 0, 0, zero, zero])
        for i, value in enumerate((row.cost, row.gpu_seconds, row.requests, row.tokens,
                                   row.node_cost, row.node_idle_cost)):  # fmt: skip
            acc[i] += value  # type: ignore[operator]
    return [
        EndpointMonth(endpoint, currency, *values)  # type: ignore[arg-type]
        for (endpoint, currency), values in sorted(sums.items())
    ]


def usage_without_cost(*, month: dt.date) -> list[tuple[dt.date, str]]:
    """(day, endpoint) in the calendar month with usage but no EndpointCost row: pods without
    the `finops.io/endpoint` label, or an endpoint name that differs between metrics and pods."""
    first = month.replace(day=1)
    start = dt.datetime.combine(first, dt.time(), dt.UTC)
    end = dt.datetime.combine((first + dt.timedelta(days=32)).replace(day=1), dt.time(), dt.UTC)
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
    return [dt.datetime.strptime(text, "%Y-%m").date() for text in periods or []]
