"""The watched series, read from the ledger and its rollups (in tasks only, never for a page).

Every amount is converted to the reporting currency at its day's rate (finops.currency) and
rounded once per ledger cell and day; series values are exact sums of those rounded cells, so
the drivers of an event add up to its figures to the last stored decimal.

A ledger cell is what used the cost: the endpoint a pod served, else the run, else the service
(a node's idle GPU capacity is its service's). Every ledger row has exactly one cell, so cells
partition a team's cost. Which SKU and which resource (ResourceId) a cost was are not ledger
columns: line_drivers.py traces the team rows kept here (`team_rows`) back to line items.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db.models import Q

from billing_ingest.models import JobRecord
from billing_ingest.money import MoneySum
from finops.attribution.models import AllocatedCost, Category
from finops.attribution.policies import node_clusters
from finops.currency.selectors import FxRateMissing, converter_for, money_round
from finops.inference.models import EndpointCost

logger = logging.getLogger(__name__)

ZERO = Decimal(0)
THOUSAND = Decimal(1000)

# (dimension, key) of a driver cell: ("run", "llm-pretrain-7"), ("service", "Amazon EC2"), ...
Cell = tuple[str, str]


@dataclass(frozen=True, slots=True)
class LedgerCell:
    team_id: int | None
    provider: str
    service: str
    cell: Cell


# The ledger dimensions a row shares with its line items: (source batch, provider, billing
# account, sub-account, service, pricing category, billing currency).
LineDims = tuple[int | None, str, str, str, str, str, str]


@dataclass(frozen=True, slots=True)
class TeamRow:
    """A team's ledger row (one ledger_load group) in the reporting currency, with the ledger
    dimensions its line items share."""

    team_id: int
    day: dt.date
    node: str
    category: str
    dims: LineDims
    amount: Decimal


@dataclass(slots=True)
class LedgerData:
    """The ledger over [first_day, last_day], per day and cell, in the reporting currency."""

    first_day: dt.date
    last_day: dt.date
    currency: str
    cells: dict[dt.date, dict[LedgerCell, Decimal]] = field(default_factory=dict)
    # Per team and day: cost per (service, sku, resource), for new cost sources.
    sources: dict[int, dict[dt.date, dict[tuple[str, str, str], Decimal]]] = field(
        default_factory=dict
    )
    # Per cluster and day: node -> [idle cost, all cost] of its GPU nodes.
    nodes: dict[str, dict[dt.date, dict[str, list[Decimal]]]] = field(default_factory=dict)
    # Every team's ledger rows as converted and rounded into `cells`, with what identifies
    # their line items (line_drivers.py): their amounts sum to the team's cells exactly.
    team_rows: list[TeamRow] = field(default_factory=list)
    # The teams' rows of the nodes they pay themselves (idle they own), whose SKUs are traced
    # into `sources` by line_drivers.sources_trace.
    owned_node_rows: list[TeamRow] = field(default_factory=list)
    # Per (ledger dimensions, day): the nodes the ledger has rows of (of any team or none), so
    # a tagged row is never traced to a node's line item.
    ledger_nodes: dict[tuple[LineDims, dt.date], set[str]] = field(default_factory=dict)

    def days(self) -> list[dt.date]:
        count = (self.last_day - self.first_day).days + 1
        return [self.first_day + dt.timedelta(days=i) for i in range(max(count, 0))]


def _cell(endpoint: str | None, run_id: str, service: str, provider: str) -> Cell:
    if endpoint:
        return ("endpoint", endpoint)
    if run_id:
        return ("run", run_id)
    # A node's cost outside runs (its idle capacity) is named by its service here; the node
    # itself is a driver of the resource dimension (line_drivers.py).
    return ("service", service or provider or "(none)")


def ledger_span() -> tuple[dt.date, dt.date] | None:
    """First and last day the ledger has."""
    days = AllocatedCost.objects.order_by("day").values_list("day", flat=True)
    first = days.first()
    last = AllocatedCost.objects.order_by("-day").values_list("day", flat=True).first()
    return (first, last) if first is not None and last is not None else None


def _clusters(nodes: Iterable[str], first_day: dt.date, last_day: dt.date) -> dict[str, str]:
    wanted = set(nodes)
    jobs = JobRecord.objects.filter(
        Q(end__isnull=True) | Q(end__date__gte=first_day), start__date__lte=last_day
    ).values_list("nodes", "cluster")
    return node_clusters((n, c) for names, c in jobs.iterator() for n in names if n in wanted)


_LEDGER_FIELDS = (
    "day", "team_id", "provider_name", "service_name", "run_id", "node", "job__endpoint",
    "job_id", "category", "billing_currency", "source_batch_id", "billing_account_id",
    "sub_account_id", "pricing_category",
)  # fmt: skip


def ledger_load(*, first_day: dt.date, last_day: dt.date) -> LedgerData:
    """The ledger of [first_day, last_day] in the reporting currency (one grouped query).

    Rows in a currency with no FX rate for their day are left out, with a warning: a
    converted series must not silently mix currencies."""
    currency = settings.FINOPS_REPORTING_CURRENCY
    rows = list(
        AllocatedCost.objects.filter(day__gte=first_day, day__lte=last_day)
        .values_list(*_LEDGER_FIELDS)
        .annotate(total=MoneySum("amount"))
        .order_by()
    )
    converter = converter_for(
        to_currency=currency,
        currencies={row[9] for row in rows},
        first_day=first_day,
        last_day=last_day,
    )
    data = LedgerData(first_day=first_day, last_day=last_day, currency=currency)
    missing: set[tuple[str, dt.date]] = set()
    node_rows: list[tuple[dt.date, str, bool, Decimal]] = []
    owned_nodes: list[TeamRow] = []
    for (
        day,
        team_id,
        provider,
        service,
        run_id,
        node,
        endpoint,
        job_id,
        category,
        cur,
        batch_id,
        account,
        sub_account,
        pricing,
        total,
    ) in rows:
        try:
            amount = money_round(converter.exact(day=day, currency=cur, amount=total or ZERO))
        except FxRateMissing:
            missing.add((cur, day))
            continue
        key = LedgerCell(team_id, provider, service, _cell(endpoint, run_id, service, provider))
        day_cells = data.cells.setdefault(day, {})
        day_cells[key] = day_cells.get(key, ZERO) + amount
        if node:
            node_rows.append((day, node, category == Category.IDLE, amount))
        dims: LineDims = (batch_id, provider, account, sub_account, service, pricing, cur)
        if node:
            data.ledger_nodes.setdefault((dims, day), set()).add(node)
        if team_id is not None:
            data.team_rows.append(TeamRow(team_id, day, node, category, dims, amount))
            # A node is the team's own resource only where it pays the node itself (idle it
            # owns); a job's share of a shared node is not "a resource the team has".
            resource = node if node and job_id is None else ""
            owned_nodes.append(TeamRow(team_id, day, resource, category, dims, amount))
    if missing:
        logger.warning("anomalies: no FX rate to %s for %d currency-days", currency, len(missing))
    # The SKUs of the teams' own nodes are traced to their line items (line_drivers.py,
    # sources_trace); the rest of a team's cost is a source by its service alone.
    for row in owned_nodes:
        if row.node:
            data.owned_node_rows.append(row)
            continue
        per_day = data.sources.setdefault(row.team_id, {}).setdefault(row.day, {})
        source = (row.dims[4], "", "")
        per_day[source] = per_day.get(source, ZERO) + row.amount
    clusters = _clusters({n for _, n, _, _ in node_rows}, first_day, last_day)
    for day, node, idle, amount in node_rows:
        cluster = clusters.get(node)
        if cluster is None:
            continue
        acc = data.nodes.setdefault(cluster, {}).setdefault(day, {}).setdefault(node, [ZERO, ZERO])
        if idle:
            acc[0] += amount
        acc[1] += amount
    return data


@dataclass(frozen=True, slots=True)
class EndpointDay:
    cost: Decimal
    requests: int


def endpoint_days(
    *, first_day: dt.date, last_day: dt.date
) -> dict[str, dict[dt.date, EndpointDay]]:
    """EndpointCost per endpoint and day, cost in the reporting currency (days without a rate
    are left out)."""
    currency = settings.FINOPS_REPORTING_CURRENCY
    rows = list(
        EndpointCost.objects.filter(day__gte=first_day, day__lte=last_day)
        .values_list("endpoint", "day", "billing_currency", "requests")
        .annotate(total=MoneySum("cost"))
        .order_by()
    )
    converter = converter_for(
        to_currency=currency, currencies={r[2] for r in rows}, first_day=first_day,
        last_day=last_day,
    )  # fmt: skip
    costs: dict[tuple[str, dt.date], Decimal] = defaultdict(Decimal)
    requests: dict[tuple[str, dt.date], int] = {}
    for endpoint, day, cur, count, total in rows:
        try:
            costs[(endpoint, day)] += money_round(
                converter.exact(day=day, currency=cur, amount=total or ZERO)
            )
        except FxRateMissing:
            continue
        # Usage is counted in full in each currency row of an endpoint-day: take it once.
        requests[(endpoint, day)] = max(requests.get((endpoint, day), 0), count)
    out: dict[str, dict[dt.date, EndpointDay]] = {}
    for (endpoint, day), cost in costs.items():
        out.setdefault(endpoint, {})[day] = EndpointDay(cost, requests.get((endpoint, day), 0))
    return out
