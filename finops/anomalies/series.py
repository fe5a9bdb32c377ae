"""The watched series, read from the ledger summed by the database (in tasks only, never for a
page).

Every amount is converted to the reporting currency at its day's rate (finops.currency) and
rounded once per ledger group (a day's rows alike in every ledger dimension: _LEDGER_FIELDS);
every figure here is an exact sum of those rounded groups, so the drivers of an event add up to
its figures to the last stored decimal. In the reporting currency that rounding is the identity,
so those rows are summed by the database at whatever grain a figure needs (_sums); rows in other
currencies are read group by group and converted.

What is read for the whole span (ledger_load) does not grow with the runs and jobs: sums per
team, day, provider and service; per endpoint and team; per day, node and category; the nodes'
clusters; the rows of the nodes teams pay themselves. The cells of an event (team_cells) and its
team's rows (team_rows, traced to line items by line_drivers.py) are read for the events found
only, for their team and days.

A ledger cell is what used the cost: the endpoint a pod served, else the run, else the service
(a node's idle GPU capacity is its service's). Every ledger row has exactly one cell, so cells
partition a team's cost. Which SKU and which resource (ResourceId) a cost was are not ledger
columns: line_drivers.py traces a team's rows back to line items.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from itertools import repeat
from operator import itemgetter
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet

from billing_ingest.models import JobRecord
from finops.attribution.inputs.policies import node_clusters
from finops.attribution.models import AllocatedCost, Category
from finops.core.money import MoneySum
from finops.currency.selectors import Converter, FxRateMissing, converter_for, money_round
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
    """The ledger over [first_day, last_day] in the reporting currency, summed as the detector
    watches it; the finer reads an event needs (its cells, its team's rows) are the functions
    below, for the teams and days of the events found only."""

    first_day: dt.date
    last_day: dt.date
    currency: str
    # Per team and day: cost per (provider, service).
    teams: dict[int, dict[dt.date, dict[tuple[str, str], Decimal]]] = field(default_factory=dict)
    # Endpoint -> the team with the largest cost of its cells (ties: lower id; None: no team).
    endpoint_owners: dict[str, int | None] = field(default_factory=dict)
    # Per team and day: cost per (service, sku, resource), for new cost sources.
    sources: dict[int, dict[dt.date, dict[tuple[str, str, str], Decimal]]] = field(
        default_factory=dict
    )
    # Per cluster and day: node -> [idle cost, all cost] of its GPU nodes.
    nodes: dict[str, dict[dt.date, dict[str, list[Decimal]]]] = field(default_factory=dict)
    # The teams' rows of the nodes they pay themselves (idle they own), whose SKUs are traced
    # into `sources` by line_drivers.sources_trace.
    owned_node_rows: list[TeamRow] = field(default_factory=list)
    # (currency, day) pairs with no FX rate to `currency`: their rows are left out everywhere.
    missing: set[tuple[str, dt.date]] = field(default_factory=set)
    # The rates from the currencies met so far (loaded again when another one turns up).
    rated: frozenset[str] = frozenset()
    _converter: Converter | None = None

    def converter(self, currencies: Iterable[str] = ()) -> Converter:
        """Exact conversion to `currency` from these currencies and those asked for before."""
        wanted = self.rated | set(currencies)
        if self._converter is None or wanted != self.rated:
            self._converter = converter_for(
                to_currency=self.currency, currencies=wanted, first_day=self.first_day,
                last_day=self.last_day,
            )  # fmt: skip
            self.rated = frozenset(wanted)
        return self._converter

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
    """Node -> cluster (policies.node_clusters) from the jobs of the span, counted per (node,
    cluster) in SQL: the jobs' node lists are never read into Python."""
    wanted = set(nodes)
    if not wanted:
        return {}
    # Instants, not __date lookups (SQLite runs a Python function per row for those): the
    # same jobs, days being UTC days.
    start = dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC)
    end = dt.datetime.combine(last_day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    jobs = JobRecord.objects.filter(Q(end__isnull=True) | Q(end__gte=start), start__lt=end).values(
        "id"
    )
    ids_sql, params = jobs.query.sql_with_params()
    vendor = connection.vendor
    elements = (
        "jsonb_array_elements_text(j.nodes)" if vendor == "postgresql" else "json_each(j.nodes)"
    )
    table = connection.ops.quote_name(JobRecord._meta.db_table)
    sql = (
        f"SELECT n.value, j.cluster, COUNT(*) FROM {table} j, {elements} AS n "
        f"WHERE j.id IN ({ids_sql}) GROUP BY n.value, j.cluster"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        counts = [(n, c, k) for n, c, k in cursor.fetchall() if n in wanted]
    return node_clusters(pair for n, c, k in counts for pair in repeat((n, c), k))


_LEDGER_FIELDS = (
    "day", "team_id", "provider_name", "service_name", "run_id", "node", "job__endpoint",
    "job_id", "category", "billing_currency", "source_batch_id", "billing_account_id",
    "sub_account_id", "pricing_category",
)  # fmt: skip
_DAY, _CURRENCY = _LEDGER_FIELDS.index("day"), _LEDGER_FIELDS.index("billing_currency")

# A ledger group (one value per _LEDGER_FIELDS) and its amount in the reporting currency.
LedgerRow = tuple[Any, ...]


def _span(first_day: dt.date, last_day: dt.date) -> QuerySet[AllocatedCost]:
    return AllocatedCost.objects.filter(day__gte=first_day, day__lte=last_day)


def _converted(
    data: LedgerData, rows: QuerySet[AllocatedCost]
) -> Iterator[tuple[LedgerRow, Decimal]]:
    """The rows grouped by every ledger dimension (_LEDGER_FIELDS), each group's sum converted
    at its day's rate and rounded once: the unit every figure here is a sum of. A group whose
    currency has no rate that day is left out (data.missing)."""
    groups = rows.values_list(*_LEDGER_FIELDS).annotate(total=MoneySum("amount")).order_by()
    converter = data.converter()
    for *fields, total in groups.iterator(chunk_size=5000):
        day, cur = fields[_DAY], fields[_CURRENCY]
        try:
            converter = data.converter({cur}) if cur not in data.rated else converter
            amount = money_round(converter.exact(day=day, currency=cur, amount=total or ZERO))
        except FxRateMissing:
            data.missing.add((cur, day))
            continue
        yield tuple(fields), amount


# Values computed per group in SQL, and the same from a ledger group (_LEDGER_FIELDS) in Python.
_JOB, _NODE = _LEDGER_FIELDS.index("job_id"), _LEDGER_FIELDS.index("node")
_DERIVED: dict[str, tuple[Any, Callable[[LedgerRow], Any]]] = {
    # A node the team pays itself (idle it owns), not a job's share of it.
    "owned": (
        ExpressionWrapper(Q(job__isnull=True) & ~Q(node=""), output_field=BooleanField()),
        lambda fields: fields[_JOB] is None and fields[_NODE] != "",
    ),
}


def _sums(
    data: LedgerData, rows: QuerySet[AllocatedCost], by: tuple[str, ...]
) -> dict[Any, Decimal]:
    """The rows' cost in the reporting currency per `by` (names among _LEDGER_FIELDS and
    _DERIVED), exactly the sum of their converted and rounded groups (_converted). Rows in the
    reporting currency are summed by the database: converting them is the identity and their
    amounts already have the ledger's places, so rounding them one by one changes nothing.
    Only rows in other currencies are read group by group."""
    out: dict[Any, Decimal] = {}
    foreign: set[str] = set()
    grouped = (
        rows.annotate(**{name: _DERIVED[name][0] for name in by if name in _DERIVED})
        .values_list(*by, "billing_currency")
        .annotate(total=MoneySum("amount"))
        .order_by()
    )
    # Fetched whole, not with .iterator(): a few thousand sums at most, and PostgreSQL plans a
    # server-side cursor for its first rows (no parallel scan, a sort to group): 4.3 s against
    # 0.5 s for the teams' sums of a 700k-row month.
    for *key, cur, total in grouped:
        if cur == data.currency:
            out[tuple(key)] = total or ZERO
        else:
            foreign.add(cur)
    if foreign:
        data.converter(foreign)
        keys = [_field_reader(name) for name in by]
        for fields, amount in _converted(data, rows.exclude(billing_currency=data.currency)):
            key = tuple(read(fields) for read in keys)
            out[key] = out.get(key, ZERO) + amount
    return out


def _field_reader(name: str) -> Callable[[LedgerRow], Any]:
    if name in _DERIVED:
        return _DERIVED[name][1]
    return itemgetter(_LEDGER_FIELDS.index(name))


_TEAM_ROW = itemgetter(*(_LEDGER_FIELDS.index(name) for name in (
    "team_id", "day", "node", "category", "source_batch_id", "provider_name",
    "billing_account_id", "sub_account_id", "service_name", "pricing_category",
    "billing_currency",
)))  # fmt: skip


def _team_row(fields: LedgerRow, amount: Decimal) -> TeamRow:
    team_id, day, node, category, *dims = _TEAM_ROW(fields)
    return TeamRow(team_id, day, node, category, tuple(dims), amount)


def ledger_load(*, first_day: dt.date, last_day: dt.date) -> LedgerData:
    """The ledger of [first_day, last_day] in the reporting currency, summed in SQL per team
    series, endpoint, new cost source and node: a handful of grouped queries whatever the
    number of ledger rows, runs and jobs.

    Rows in a currency with no FX rate for their day are left out, with a warning: a
    converted series must not silently mix currencies."""
    currency = settings.FINOPS_REPORTING_CURRENCY
    span = _span(first_day, last_day)
    data = LedgerData(first_day, last_day, currency)
    teams = span.filter(team__isnull=False)
    _teams_load(data, teams)
    data.endpoint_owners = _endpoint_owners(
        _sums(data, span.filter(job__endpoint__gt=""), ("job__endpoint", "team_id"))
    )
    _nodes_load(data, span)
    if data.missing:
        logger.warning(
            "anomalies: no FX rate to %s for %d currency-days", currency, len(data.missing)
        )
    return data


def _teams_load(data: LedgerData, teams: QuerySet[AllocatedCost]) -> None:
    """The teams' series, and their new-cost-source cells: from one grouped query.

    A node is the team's own resource only where it pays the node itself (idle it owns); a
    job's share of a shared node is not "a resource the team has". The SKUs of the teams' own
    nodes are traced to their line items (line_drivers.py, sources_trace); the rest of a team's
    cost is a source by its service alone."""
    sums = _sums(data, teams, ("team_id", "day", "provider_name", "service_name", "owned"))
    for (team_id, day, provider, service, owned), amount in sums.items():
        per_day = data.teams.setdefault(team_id, {}).setdefault(day, {})
        per_day[(provider, service)] = per_day.get((provider, service), ZERO) + amount
        if not owned:
            cells = data.sources.setdefault(team_id, {}).setdefault(day, {})
            cells[(service, "", "")] = cells.get((service, "", ""), ZERO) + amount
    if any(owned for *_, owned in sums):
        owned_rows = teams.filter(job__isnull=True).exclude(node="")
        data.owned_node_rows = [_team_row(f, a) for f, a in _converted(data, owned_rows)]


def _endpoint_owners(totals: Mapping[tuple[str, int | None], Decimal]) -> dict[str, int | None]:
    """An endpoint belongs to the team with the largest cost of its cells (ties: lower id)."""
    per_endpoint: dict[str, dict[int | None, Decimal]] = {}
    for (endpoint, team_id), amount in totals.items():
        per_endpoint.setdefault(endpoint, {})[team_id] = amount
    return {
        endpoint: min(per_team.items(), key=lambda kv: (-kv[1], kv[0] or 0))[0]
        for endpoint, per_team in per_endpoint.items()
    }


def _nodes_load(data: LedgerData, span: QuerySet[AllocatedCost]) -> None:
    """Idle and all cost per cluster, day and GPU node (cluster_idle series)."""
    sums = _sums(data, span.exclude(node=""), ("day", "node", "category"))
    clusters = _clusters({node for _, node, _ in sums}, data.first_day, data.last_day)
    for (day, node, category), amount in sums.items():
        cluster = clusters.get(node)
        if cluster is None:
            continue
        acc = data.nodes.setdefault(cluster, {}).setdefault(day, {}).setdefault(node, [ZERO, ZERO])
        if category == Category.IDLE:
            acc[0] += amount
        acc[1] += amount


def _clamp(data: LedgerData, first_day: dt.date, last_day: dt.date) -> tuple[dt.date, dt.date]:
    return max(first_day, data.first_day), min(last_day, data.last_day)


@dataclass(slots=True)
class TeamLedger:
    """The ledger groups (_converted) of some teams over [first_day, last_day], read once: what
    the events' cells (team_cells) and their teams' rows (team_rows, traced to line items) are
    both sums of, so detection reads a team's ledger once however many events it has."""

    team_ids: frozenset[int]
    first_day: dt.date
    last_day: dt.date
    groups: list[tuple[LedgerRow, Decimal]]
    by_team: dict[int, list[tuple[LedgerRow, Decimal]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for group in self.groups:
            self.by_team.setdefault(group[0][_TEAM], []).append(group)

    def covers(self, team_ids: Iterable[int], first_day: dt.date, last_day: dt.date) -> bool:
        return (
            set(team_ids) <= self.team_ids
            and self.first_day <= first_day
            and last_day <= self.last_day
        )

    def cells(
        self, team_id: int, first_day: dt.date, last_day: dt.date
    ) -> dict[dt.date, dict[LedgerCell, Decimal]]:
        """team_cells from the groups read: each cell the exact sum of its converted groups."""
        out: dict[dt.date, dict[LedgerCell, Decimal]] = {}
        for fields, amount in self.by_team.get(team_id, []):
            day = fields[_DAY]
            if not first_day <= day <= last_day:
                continue
            provider, service = fields[_PROVIDER], fields[_SERVICE]
            cell = _cell(fields[_ENDPOINT], fields[_RUN], service, provider)
            key = LedgerCell(team_id, provider, service, cell)
            day_cells = out.setdefault(day, {})
            day_cells[key] = day_cells.get(key, ZERO) + amount
        return out

    def rows(self, team_ids: Iterable[int], first_day: dt.date, last_day: dt.date) -> list[TeamRow]:
        """team_rows from the groups read."""
        wanted = set(team_ids)
        return [
            _team_row(fields, amount)
            for fields, amount in self.groups
            if fields[_TEAM] in wanted and first_day <= fields[_DAY] <= last_day
        ]


_TEAM, _RUN = _LEDGER_FIELDS.index("team_id"), _LEDGER_FIELDS.index("run_id")
_PROVIDER, _SERVICE = _LEDGER_FIELDS.index("provider_name"), _LEDGER_FIELDS.index("service_name")
_ENDPOINT = _LEDGER_FIELDS.index("job__endpoint")


def team_ledger(
    data: LedgerData, team_ids: Iterable[int], first_day: dt.date, last_day: dt.date
) -> TeamLedger:
    """The teams' ledger groups over [first_day, last_day] (clamped to the data's span), in
    one read."""
    first_day, last_day = _clamp(data, first_day, last_day)
    ids = sorted(set(team_ids))
    rows = _span(first_day, last_day).filter(team_id__in=ids)
    return TeamLedger(frozenset(ids), first_day, last_day, list(_converted(data, rows)))


def team_cells(
    data: LedgerData, team_id: int, first_day: dt.date, last_day: dt.date
) -> dict[dt.date, dict[LedgerCell, Decimal]]:
    """A team's cost per day and ledger cell over [first_day, last_day] (an event's days and
    its baseline): what used it, endpoint, else run, else service (see the module docstring)."""
    first_day, last_day = _clamp(data, first_day, last_day)
    rows = _span(first_day, last_day).filter(team_id=team_id)
    by = ("day", "provider_name", "service_name", "job__endpoint", "run_id")
    out: dict[dt.date, dict[LedgerCell, Decimal]] = {}
    for (day, provider, service, endpoint, run_id), amount in _sums(data, rows, by).items():
        key = LedgerCell(team_id, provider, service, _cell(endpoint, run_id, service, provider))
        day_cells = out.setdefault(day, {})
        day_cells[key] = day_cells.get(key, ZERO) + amount
    return out


def team_rows(
    data: LedgerData, team_ids: Iterable[int], first_day: dt.date, last_day: dt.date
) -> list[TeamRow]:
    """The teams' ledger rows of [first_day, last_day] in the reporting currency, with what
    identifies their line items (line_drivers.py): they sum to the teams' series exactly."""
    first_day, last_day = _clamp(data, first_day, last_day)
    rows = _span(first_day, last_day).filter(team_id__in=sorted(set(team_ids)))
    return [_team_row(fields, amount) for fields, amount in _converted(data, rows)]


def ledger_nodes(
    data: LedgerData, first_day: dt.date, last_day: dt.date
) -> dict[tuple[LineDims, dt.date], set[str]]:
    """Per (ledger dimensions, day) of [first_day, last_day]: the nodes the ledger has rows of
    (of any team or none), so a tagged row is never traced to a node's line item."""
    first_day, last_day = _clamp(data, first_day, last_day)
    rows = (
        _span(first_day, last_day)
        .exclude(node="")
        .values_list("source_batch_id", "provider_name", "billing_account_id",
                     "sub_account_id", "service_name", "pricing_category", "billing_currency",
                     "day", "node")
        .distinct()
        .order_by()
    )  # fmt: skip
    out: dict[tuple[LineDims, dt.date], set[str]] = {}
    for batch, provider, account, sub, service, pricing, cur, day, node in rows.iterator(5000):
        if (cur, day) in data.missing or not _convertible(data, cur, day):
            continue
        dims: LineDims = (batch, provider, account, sub, service, pricing, cur)
        out.setdefault((dims, day), set()).add(node)
    return out


def _convertible(data: LedgerData, currency: str, day: dt.date) -> bool:
    try:
        rates = data.converter({currency}).table
        rates.rate(day=day, from_currency=currency, to_currency=data.currency)
    except FxRateMissing:
        data.missing.add((currency, day))
        return False
    return True


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
