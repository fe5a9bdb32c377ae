"""SKU and resource drivers: a team's cost traced from the ledger back to its line items.

The ledger has no SkuId or ResourceId column. A team's ledger row is a share of the line items
that have its ledger dimensions (source batch, provider, accounts, service, pricing category,
currency) on its day, and which of them depends on the row:
- a GPU node's row (a job's share, idle capacity): that node's line items;
- a tagged row (a mapping rule or a team tag gave whole lines to the team): the lines the
  rules give to that team, minus the lines of nodes;
- a shared row (a shared-cost rule split lines nobody owns): the unowned lines, minus nodes;
- any other row without a node: the lines of its dimensions that are not nodes'.
The row's amount is split over those lines pro rata to their cost on that day (EffectiveCost
spread evenly over the charge period, as attribution spreads it), rounded with the largest
remainder, so each row's pieces add up to it exactly. A row no line item matches (the bill or
the rules changed since attribution ran) is UNTRACED: it counts in the totals and is never a
driver, so it ends in the dimension's `unexplained`.

Per event, the SKU and resource breakdowns are each split like the ledger cells (findings.py):
drivers + unexplained == impact, to the last stored decimal. Read at detection time only, for
the days of the events found and their baselines, aggregated in SQL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from django.db.models import Case, DateField, DateTimeField, F, Func, Q, When

from billing_ingest.models import CostLineItem
from finops.anomalies.findings import (
    BASELINE_DAYS,
    PROVIDER,
    QUANTUM,
    SERVICE,
    TEAM,
    Finding,
    money,
    split_drivers,
)
from finops.anomalies.series import (
    ZERO,
    Cell,
    LedgerData,
    LineDims,
    TeamLedger,
    TeamRow,
    ledger_nodes,
    team_rows,
)
from finops.attribution.engine import NODE_TAG_KEYS
from finops.attribution.inputs.team_mapping import TeamResolver
from finops.attribution.models import Category
from finops.core.money import MoneySum
from finops.org.models import Team

UNTRACED = "(not traced to a line item)"
NO_SKU = "(no SKU)"
NO_RESOURCE = "(no resource)"
SKU, RESOURCE = "sku", "resource"

# (sku, resource) -> amount
Pieces = dict[tuple[str, str], Decimal]
# team id -> day -> (provider, service, sku, resource) -> amount
Traced = dict[int, dict[dt.date, dict[tuple[str, str, str, str], Decimal]]]


@dataclass(frozen=True, slots=True)
class Line:
    """Line items of one (dims, day) with the same SKU, resource and owner: their cost that
    day, the node names they can be known by, and their owner (team id, None: nobody)."""

    weight: Decimal
    sku: str
    resource: str
    nodes: frozenset[str]
    owner: int | None


def split_signed(total: Decimal, weights: Sequence[Decimal]) -> list[Decimal] | None:
    """total pro rata to weights (of any sign) in QUANTUM units, largest remainder: sums to
    total exactly. None when the weights sum to zero (nothing to be pro rata to)."""
    whole = sum(weights, ZERO)
    if not weights or whole == 0:
        return None
    units = money(total) / QUANTUM
    exact = [units * w / whole for w in weights]
    floors = [x.to_integral_value(rounding=ROUND_FLOOR) for x in exact]
    remainder = int(units - sum(floors, ZERO))
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - floors[i]), i))
    for i in order[:remainder]:
        floors[i] += 1
    return [f * QUANTUM for f in floors]


def _node_names(resource_id: str, resource_name: str, tags: object) -> frozenset[str]:
    """The names attribution can know a line's node by (finops.attribution.inputs.month)."""
    names = {resource_name, resource_id, resource_id.rstrip("/").rsplit("/", 1)[-1]}
    if isinstance(tags, dict):
        names |= {v for v in map(tags.get, NODE_TAG_KEYS) if isinstance(v, str)}
    return frozenset(n for n in names if n)


def _day_weights(
    start: dt.datetime, end: dt.datetime, total: Decimal, first: dt.date, last: dt.date
) -> Iterable[tuple[dt.date, Decimal]]:
    """A line's cost per UTC day of [first, last], spread evenly over its charge period."""
    seconds = Decimal((end - start).total_seconds())
    if seconds <= 0:
        if first <= start.date() <= last:
            yield start.date(), total
        return
    day = max(start.date(), first)
    while day <= min(last, (end - dt.timedelta(microseconds=1)).date()):
        lo = max(start, dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC))
        hi = min(end, dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC))
        if hi > lo:
            yield day, total * Decimal((hi - lo).total_seconds()) / seconds
        day += dt.timedelta(days=1)


_LINE_FIELDS = (
    "batch_id", "provider_name", "billing_account_id", "sub_account_id", "service_name",
    "pricing_category", "billing_currency", "sku_id", "resource_id", "resource_name", "tags",
)  # fmt: skip


class _UtcDay(Func):
    """The UTC day of a datetime, in the database's own SQL (TruncDate runs a Python function
    per row on SQLite). `before_end`: the day of the instant before it (an exclusive end)."""

    output_field = DateField()

    def __init__(self, expression: Any, *, before_end: bool = False) -> None:
        super().__init__(expression)
        self.before_end = before_end

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Datetimes are stored as UTC text; SQLite keeps milliseconds.
        template = "DATE(%(expressions)s, '-0.001 seconds')" if self.before_end else None
        return self.as_sql(compiler, connection, function="DATE", template=template, **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        shift = " - INTERVAL '1 microsecond'" if self.before_end else ""
        template = f"((%(expressions)s{shift}) AT TIME ZONE 'UTC')::date"
        return self.as_sql(compiler, connection, template=template, **extra)


def _line_rows(
    ids: Sequence[int], first_day: dt.date, last_day: dt.date, nodes: frozenset[str] | None = None
) -> Iterable[tuple[Any, ...]]:
    """(fields..., day, charge start, charge end, cost) of the settled line items of these
    batches charged on [first_day, last_day], in one grouped query. Lines of one UTC day
    (hourly and daily usage: nearly all rows) are summed per day (start and end None); longer
    ones keep their charge period (day None), to be spread over it. `nodes`: only the lines
    named so (ResourceName or ResourceId)."""
    start = dt.datetime.combine(first_day, dt.time(), tzinfo=dt.UTC)
    end = dt.datetime.combine(last_day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    one_day = Q(first=F("last"))
    named = Q() if nodes is None else Q(resource_name__in=nodes) | Q(resource_id__in=nodes)
    rows = (
        CostLineItem.objects.settled()
        .filter(named, batch_id__in=ids, charge_period_start__lt=end, charge_period_end__gt=start)
        .annotate(first=_UtcDay("charge_period_start"))
        .annotate(last=_UtcDay("charge_period_end", before_end=True))
        .annotate(
            day=Case(When(one_day, then=F("first")), default=None, output_field=DateField()),
            period_start=Case(
                When(one_day, then=None),
                default=F("charge_period_start"),
                output_field=DateTimeField(),
            ),
            period_end=Case(
                When(one_day, then=None),
                default=F("charge_period_end"),
                output_field=DateTimeField(),
            ),
        )
        .values_list(*_LINE_FIELDS, "day", "period_start", "period_end")
        .annotate(total=MoneySum("effective_cost"))
        .order_by()
    )
    return rows.iterator(chunk_size=5000)


def lines_load(
    *,
    batch_ids: Iterable[int],
    first_day: dt.date,
    last_day: dt.date,
    nodes: frozenset[str] | None = None,
) -> dict[tuple[LineDims, dt.date], list[Line]]:
    """What a row is traced to: the line items of these batches on [first_day, last_day], per
    (ledger dimensions, day), merged by SKU, resource, node names and owner. `nodes`: only
    the line items of these nodes (by ResourceName or ResourceId)."""
    ids = sorted({b for b in batch_ids if b is not None})
    if not ids:
        return {}
    resolver = TeamResolver.from_db()
    slugs = dict(Team.objects.values_list("slug", "id"))
    merged: dict[tuple[LineDims, dt.date, str, str, frozenset[str], int | None], Decimal] = {}
    for row in _line_rows(ids, first_day, last_day, nodes):
        batch, prov, acct, sub, svc, pricing, cur, sku, rid, rname, tags = row[:11]
        day, c_start, c_end, total = row[11:]
        ref = resolver.line_team(tags=tags if isinstance(tags, dict) else {}, sub_account=sub)
        owner = slugs.get(ref) if isinstance(ref, str) else ref
        dims: LineDims = (batch, prov, acct, sub, svc, pricing, cur)
        nodes = _node_names(rid, rname, tags)
        resource = rid or rname or NO_RESOURCE
        days = (
            [(day, total or ZERO)]
            if day is not None
            else _day_weights(c_start, c_end, total or ZERO, first_day, last_day)
        )
        for on, weight in days:
            key = (dims, on, sku or NO_SKU, resource, nodes, owner)
            merged[key] = merged.get(key, ZERO) + weight
    out: dict[tuple[LineDims, dt.date], list[Line]] = {}
    for (dims, day, sku, resource, nodes, owner), weight in sorted(
        merged.items(), key=lambda kv: (kv[0][2], kv[0][3], sorted(kv[0][4]), kv[0][5] or 0)
    ):
        out.setdefault((dims, day), []).append(Line(weight, sku, resource, nodes, owner))
    return out


def _candidates(row: TeamRow, lines: Sequence[Line], ledger_nodes: set[str]) -> list[Line]:
    if row.node:
        return [line for line in lines if row.node in line.nodes]
    not_nodes = [line for line in lines if not line.nodes & ledger_nodes]
    if row.category == Category.TAGGED:
        return [line for line in not_nodes if line.owner == row.team_id]
    if row.category == Category.SHARED:
        return [line for line in not_nodes if line.owner is None]
    return not_nodes


def row_pieces(row: TeamRow, lines: Sequence[Line], ledger_nodes: set[str]) -> Pieces:
    """The row's amount per (sku, resource), adding up to it exactly."""
    candidates = _candidates(row, lines, ledger_nodes)
    split = split_signed(row.amount, [line.weight for line in candidates])
    if split is None:
        return {(UNTRACED, UNTRACED): row.amount}
    pieces: Pieces = {}
    for line, amount in zip(candidates, split, strict=True):
        key = (line.sku, line.resource)
        pieces[key] = pieces.get(key, ZERO) + amount
    return pieces


def trace(
    data: LedgerData,
    *,
    team_ids: set[int],
    first_day: dt.date,
    last_day: dt.date,
    ledger: TeamLedger | None = None,
) -> Traced:
    """The teams' ledger rows of [first_day, last_day] per (provider, service, sku, resource).
    ledger: those teams' ledger already read (series.team_ledger), used when it covers them."""
    first, last = max(first_day, data.first_day), min(last_day, data.last_day)
    if ledger is not None and ledger.covers(team_ids, first, last):
        rows = ledger.rows(team_ids, first, last)
    else:
        rows = team_rows(data, team_ids, first_day, last_day)
    on_nodes = ledger_nodes(data, first_day, last_day)
    lines = lines_load(
        batch_ids={r.dims[0] for r in rows if r.dims[0] is not None},
        first_day=first_day,
        last_day=last_day,
    )
    out: Traced = {}
    for row in rows:
        nodes = on_nodes.get((row.dims, row.day), set())
        pieces = row_pieces(row, lines.get((row.dims, row.day), []), nodes)
        acc = out.setdefault(row.team_id, {}).setdefault(row.day, {})
        for (sku, resource), amount in pieces.items():
            key = (row.dims[1], row.dims[4], sku, resource)
            acc[key] = acc.get(key, ZERO) + amount
    return out


def sources_trace(data: LedgerData) -> None:
    """Add the teams' own nodes (data.owned_node_rows) to the new-cost-source cells, each row's
    amount split over the SKUs of the node's line items that day as row_pieces splits it (a
    node billed under two SKUs is two sources, each with its part). A row no line item matches
    keeps its service and resource, with no SKU."""
    rows = data.owned_node_rows
    lines = (
        lines_load(
            batch_ids={r.dims[0] for r in rows if r.dims[0] is not None},
            first_day=data.first_day,
            last_day=data.last_day,
            nodes=frozenset(r.node for r in rows),
        )
        if rows
        else {}
    )
    for row in rows:
        # A node's row is traced to that node's line items: the other nodes do not matter.
        pieces = row_pieces(row, lines.get((row.dims, row.day), []), set())
        per_day = data.sources.setdefault(row.team_id, {}).setdefault(row.day, {})
        for (sku, _), amount in pieces.items():
            source = (row.dims[4], "" if sku in (UNTRACED, NO_SKU) else sku, row.node)
            per_day[source] = per_day.get(source, ZERO) + amount


def _breakdown(
    finding: Finding, per_day: Mapping[dt.date, Mapping[tuple[str, str, str, str], Decimal]]
) -> tuple[dict[str, dict[Cell, Decimal]], dict[str, dict[Cell, Decimal]]]:
    """(actual, baseline) per dimension of the finding's series: its days and the
    BASELINE_DAYS before them."""
    start = finding.first - dt.timedelta(days=BASELINE_DAYS)
    actual: dict[str, dict[Cell, Decimal]] = {SKU: {}, RESOURCE: {}}
    baseline: dict[str, dict[Cell, Decimal]] = {SKU: {}, RESOURCE: {}}
    for day, parts in per_day.items():
        if finding.first <= day <= finding.last:
            target = actual
        elif start <= day < finding.first:
            target = baseline
        else:
            continue
        for (provider, service, sku, resource), amount in parts.items():
            if finding.series_kind == PROVIDER and provider != finding.series_key:
                continue
            if finding.series_kind == SERVICE and service != finding.series_key:
                continue
            for dimension, key in ((SKU, sku), (RESOURCE, resource)):
                cell = (dimension, key)
                target[dimension][cell] = target[dimension].get(cell, ZERO) + amount
    return actual, baseline


def line_drivers_attach(
    findings: Sequence[Finding], data: LedgerData, ledger: TeamLedger | None = None
) -> None:
    """Add SKU and resource drivers (and their unexplained rests) to team cost findings.
    ledger: the findings' teams' ledger already read (their cells'), not read again."""
    wanted = [f for f in findings if f.series_kind in (TEAM, PROVIDER, SERVICE)]
    if not wanted:
        return
    traced = trace(
        data,
        team_ids={f.team_id for f in wanted if f.team_id is not None},
        first_day=min(f.first for f in wanted) - dt.timedelta(days=BASELINE_DAYS),
        last_day=max(f.last for f in wanted),
        ledger=ledger,
    )
    for finding in wanted:
        if finding.team_id is None:
            continue
        actual, baseline = _breakdown(finding, traced.get(finding.team_id, {}))
        rests: dict[str, Decimal] = {}
        for dimension in (SKU, RESOURCE):
            drivers, _ = split_drivers(
                actual[dimension], baseline[dimension], finding.expected,
                hidden=frozenset({(dimension, UNTRACED)}),
            )  # fmt: skip
            finding.drivers.extend(drivers)
            rests[dimension] = finding.impact - sum((d.delta for d in drivers), ZERO)
        finding.unexplained_sku = rests[SKU]
        finding.unexplained_resource = rests[RESOURCE]
