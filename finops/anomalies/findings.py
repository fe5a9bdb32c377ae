"""From loaded series to findings: run the detector on every watched series, explain each
event by its drivers, and keep one finding per team and event. No writes (services.py stores).

Drivers. An event's actual cost is split over the ledger cells (series.py) of its days: what
used it (endpoint, run, else service); its expected cost over the same cells pro rata to their
cost in the 28 days before it, rounded with the largest-remainder method so the cells' expected
sum to the event's exactly. Each cell's delta is actual - expected; the largest (by size) are
the drivers, and `unexplained` is the rest of the impact, so sum(drivers.delta) + unexplained
== impact to the last stored decimal. The SKU and the resource dimensions are two more such
breakdowns of the same impact, each with its own rest (line_drivers.py).

One finding per team and event: a team's daily cost, its cost per provider and per service are
all watched; an event of a finer series whose days overlap an event of a coarser series of the
same team (team > provider > service > new sources) is the same event, seen twice, and dropped:
the coarser one's drivers name the service.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from finops.anomalies import detector, new_sources
from finops.anomalies.series import THOUSAND, ZERO, Cell, EndpointDay, LedgerCell, LedgerData
from finops.core.money import MONEY_PLACES

QUANTUM = Decimal(1).scaleb(-MONEY_PLACES)
BASELINE_DAYS = 28
CHART_BEFORE_DAYS = 28
CHART_AFTER_DAYS = 7
MAX_DRIVERS = 10

# Series kinds (Anomaly.Series values), coarse to fine for de-duplication.
TEAM, PROVIDER, SERVICE, SOURCES = "team", "provider", "service", "sources"
ENDPOINT, CLUSTER_IDLE = "endpoint", "cluster_idle"
_COARSENESS = {TEAM: 0, PROVIDER: 1, SERVICE: 2, SOURCES: 3}

# (team id, first day, last day) -> per day, cost per ledger cell of the team.
CellsReader = Callable[[int, dt.date, dt.date], Mapping[dt.date, Mapping[LedgerCell, Decimal]]]
# (team ids, first day, last day) -> the reader of those teams' cells over that span (one read
# of the ledger for every event kept).
CellsLoader = Callable[[set[int], dt.date, dt.date], CellsReader]


@dataclass(frozen=True, slots=True)
class DriverValue:
    dimension: str
    key: str
    actual: Decimal
    expected: Decimal

    @property
    def delta(self) -> Decimal:
        return self.actual - self.expected


@dataclass(slots=True)
class Finding:
    team_id: int | None
    series_kind: str
    series_key: str
    kind: str
    first: dt.date
    last: dt.date
    detected_on: dt.date
    ongoing: bool
    actual: Decimal
    expected: Decimal
    drivers: list[DriverValue] = field(default_factory=list)
    unexplained: Decimal = ZERO
    chart: list[dict[str, str]] = field(default_factory=list)
    unit: str = ""
    # The rests of the SKU and resource breakdowns (line_drivers.py), None where the series
    # has none (endpoints, clusters, new sources).
    unexplained_sku: Decimal | None = None
    unexplained_resource: Decimal | None = None
    # A cluster's idle share: the GPU node cost over the event's days the share is of (actual
    # and expected are idle cost, so actual / share_base is the event's share). None elsewhere.
    share_base: Decimal | None = None

    @property
    def impact(self) -> Decimal:
        return self.actual - self.expected

    @property
    def series(self) -> tuple[int | None, str, str]:
        return (self.team_id, self.series_kind, self.series_key)


def money(value: Decimal) -> Decimal:
    return value.quantize(QUANTUM)


def _expected_spend(
    days: Sequence[dt.date],
    per_day: Mapping[dt.date, EndpointDay],
    settings: detector.DetectorSettings,
) -> dict[dt.date, Decimal]:
    """An endpoint's expected daily cost per day (the detector's fit of its spend, which has
    its weekday pattern), for the days the fit covers."""
    costs = [per_day[d].cost if d in per_day else None for d in days]
    fits = detector.detect(days, costs, settings=settings).fits
    return {f.day: f.expected for f in fits if f.expected is not None}


def money_at_stake(days: Iterable[tuple[EndpointDay, Decimal | None, Decimal | None]]) -> Decimal:
    """The money a unit-cost event puts at stake: per day, the cost above what the day's
    requests cost at the expected unit cost, but no more than the cost above the endpoint's
    expected daily spend (a cost per 1,000 requests that rises because the traffic fell, the
    spend flat, puts nothing at stake). days: (the day, expected cost per 1,000 requests,
    expected daily cost; None when not fitted yet)."""
    total = ZERO
    for row, unit, spend in days:
        excess = row.cost - (unit * Decimal(row.requests) / THOUSAND if unit is not None else ZERO)
        if spend is not None:
            excess = min(excess, row.cost - spend)
        total += max(ZERO, excess)
    return money(total)


def allocate(total: Decimal, weights: Sequence[Decimal]) -> list[Decimal]:
    """total split pro rata to weights in QUANTUM units, largest remainder: sums to total
    exactly. Non-positive weights get 0; no positive weight: everything to nothing (all 0)."""
    units = int(money(total) / QUANTUM)
    positive = [w if w > 0 else ZERO for w in weights]
    whole = sum(positive, ZERO)
    if whole <= 0 or not units:
        return [ZERO] * len(weights)
    sign = 1 if units > 0 else -1
    exact = [abs(units) * w / whole for w in positive]
    floors = [int(x) for x in exact]
    remainder = abs(units) - sum(floors)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - floors[i]), i))
    for i in order[:remainder]:
        floors[i] += 1
    return [Decimal(sign * f) * QUANTUM for f in floors]


def split_drivers(
    actual: Mapping[Cell, Decimal],
    baseline: Mapping[Cell, Decimal],
    expected_total: Decimal,
    limit: int = MAX_DRIVERS,
    hidden: frozenset[Cell] = frozenset(),
) -> tuple[list[DriverValue], Decimal]:
    """Drivers (largest |delta| first, at most `limit`) and the unexplained rest of
    sum(actual) - expected_total. Hidden cells count in the totals, never as drivers."""
    cells = sorted(set(actual) | {c for c, v in baseline.items() if v > 0})
    expected = allocate(expected_total, [baseline.get(c, ZERO) for c in cells])
    values = [
        DriverValue(c[0], c[1], actual.get(c, ZERO), e)
        for c, e in zip(cells, expected, strict=True)
    ]
    impact = sum((v.actual for v in values), ZERO) - money(expected_total)
    ranked = sorted(
        (v for v in values if v.delta and (v.dimension, v.key) not in hidden),
        key=lambda v: (-abs(v.delta), v.key),
    )
    drivers = ranked[:limit]
    return drivers, impact - sum((d.delta for d in drivers), ZERO)


def _chart(
    fits: Sequence[detector.DayFit], first: dt.date, last: dt.date, places: int
) -> list[dict[str, str]]:
    quantum = Decimal(1).scaleb(-places)
    lo = first - dt.timedelta(days=CHART_BEFORE_DAYS)
    hi = last + dt.timedelta(days=CHART_AFTER_DAYS)

    def text(value: Decimal | None) -> str:
        return "" if value is None else str(value.quantize(quantum))

    return [
        {"day": f.day.isoformat(), "actual": text(f.actual), "expected": text(f.expected),
         "low": text(f.low), "high": text(f.high)}
        for f in fits
        if lo <= f.day <= hi
    ]  # fmt: skip


def _accepted_for(
    accepted: Mapping[tuple[int | None, str, str], list[detector.Accepted]],
    series: tuple[int | None, str, str],
) -> list[detector.Accepted]:
    """Events marked expected for the series; for a provider or service series also those of
    its team's daily cost: one event seen in both is one deliberate change."""
    own = list(accepted.get(series, []))
    team_id, kind, _ = series
    if kind in (PROVIDER, SERVICE):
        own += accepted.get((team_id, TEAM, ""), [])
    return own


@dataclass(slots=True)
class FindingsBuilder:
    data: LedgerData
    endpoints: Mapping[str, Mapping[dt.date, EndpointDay]]
    settings: detector.DetectorSettings
    accepted: Mapping[tuple[int | None, str, str], list[detector.Accepted]]
    since: dt.date
    until: dt.date
    # The teams' cells per day (series.team_ledger): read once, for the events kept.
    cells: CellsLoader
    findings: list[Finding] = field(default_factory=list)
    # Money findings whose drivers wait for their cells (read after de-duplication: an event
    # seen twice costs no read): id(finding) -> (series match, first day of its baseline).
    pending: dict[int, tuple[Callable[[str, str], bool], dt.date]] = field(default_factory=dict)
    # detector.detect results by input: a team's provider or service series is often the team
    # series itself (one provider, one service), the same days and values, detected once.
    detected: dict[tuple[object, ...], detector.Detection] = field(default_factory=dict)

    def _detect(
        self,
        days: list[dt.date],
        values: list[Decimal | None],
        accepted: list[detector.Accepted],
        weights: list[Decimal] | None = None,
    ) -> detector.Detection:
        """detector.detect, pure: the same inputs give the same result, computed once."""
        key = (tuple(values), None if weights is None else tuple(weights), tuple(accepted))
        found = self.detected.get(key)
        if found is None:
            found = detector.detect(
                days, values, weights=weights, settings=self.settings, accepted=accepted
            )
            self.detected[key] = found
        return found

    def _wanted(self, first: dt.date, last: dt.date) -> bool:
        return last >= self.since and first <= self.until

    def _money_series(
        self,
        team_id: int,
        kind: str,
        key: str,
        team_days: Mapping[dt.date, Mapping[tuple[str, str], Decimal]],
        match: Callable[[str, str], bool],
    ) -> None:
        days = self.data.days()
        values: list[Decimal | None] = [
            sum((v for (p, s), v in team_days.get(d, {}).items() if match(p, s)), ZERO)
            for d in days
        ]
        series = (team_id, kind, key)
        result = self._detect(days, values, _accepted_for(self.accepted, series))
        for event in result.events:
            if not self._wanted(event.first, event.last):
                continue
            finding = Finding(
                team_id, kind, key, event.kind, event.first, event.last, event.reported_on,
                event.ongoing, money(event.actual), money(event.expected), [], ZERO,
                _chart(result.fits, event.first, event.last, 2), self.data.currency,
            )  # fmt: skip
            # Its drivers: the cells of the event's days and of its baseline (drivers_attach).
            start = max(self.data.first_day, event.first - dt.timedelta(days=BASELINE_DAYS))
            self.pending[id(finding)] = (match, start)
            self.findings.append(finding)

    def drivers_attach(self, findings: Sequence[Finding]) -> None:
        """The drivers of the money findings kept, from their teams' cells read once."""
        waiting = [(f, self.pending[id(f)]) for f in findings if id(f) in self.pending]
        team_ids = {f.team_id for f, _ in waiting if f.team_id is not None}
        if not team_ids:
            return
        first = min(start for _, (_, start) in waiting)
        reader = self.cells(team_ids, first, max(f.last for f, _ in waiting))
        for finding, (match, start) in waiting:
            assert finding.team_id is not None  # money series are a team's
            cells = reader(finding.team_id, start, finding.last)
            actual = _match_cells(cells, match, finding.first, finding.last)
            baseline = _match_cells(cells, match, start, finding.first - dt.timedelta(days=1))
            finding.drivers, finding.unexplained = split_drivers(actual, baseline, finding.expected)

    def team_series(self) -> None:
        """A team's daily cost, and its daily cost per provider and per service."""
        for team_id, team_days in sorted(self.data.teams.items()):
            providers = sorted({p for c in team_days.values() for p, _ in c})
            services = sorted({s for c in team_days.values() for _, s in c})
            self._money_series(team_id, TEAM, "", team_days, lambda p, s: True)
            for provider in providers:
                self._money_series(team_id, PROVIDER, provider, team_days,
                                   _provider_is(provider))  # fmt: skip
            for service in services:
                self._money_series(team_id, SERVICE, service, team_days,
                                   _service_is(service))  # fmt: skip

    def new_sources(self) -> None:
        for team_id, cells in sorted(self.data.sources.items()):
            start = min(
                (d for d, c in cells.items() if any(v > 0 for v in c.values())), default=None
            )
            if start is None:
                continue
            for event in new_sources.new_sources(cells, series_start=start, settings=self.settings):
                if not self._wanted(event.first, event.last):
                    continue
                drivers = sorted(
                    (
                        DriverValue(dim, key, money(cost), ZERO)
                        for (dim, key), cost in event.sources.items()
                    ),
                    key=lambda d: (-abs(d.delta), d.key),
                )
                self.findings.append(
                    Finding(
                        team_id, SOURCES, "", detector.NEW_SOURCE, event.first, event.last,
                        event.first, False, money(event.actual), ZERO, drivers, ZERO, [],
                        self.data.currency,
                    )
                )  # fmt: skip

    def endpoint_series(self) -> None:
        owners = self.data.endpoint_owners
        days = self.data.days()
        for endpoint, per_day in sorted(self.endpoints.items()):
            team_id = owners.get(endpoint)
            values: list[Decimal | None] = []
            weights: list[Decimal] = []
            for d in days:
                row = per_day.get(d)
                if row is None or row.requests <= 0:
                    values.append(None)
                    weights.append(ZERO)
                    continue
                values.append(row.cost * THOUSAND / row.requests)
                weights.append(Decimal(row.requests) / THOUSAND)
            series = (team_id, ENDPOINT, endpoint)
            result = self._detect(days, values, _accepted_for(self.accepted, series), weights)
            if not result.events:
                continue
            spend = _expected_spend(days, per_day, self.settings)
            unit = {f.day: f.expected for f in result.fits if f.expected is not None}
            for event in result.events:
                if not self._wanted(event.first, event.last):
                    continue
                span = [d for d in days if event.first <= d <= event.last and d in per_day]
                actual = sum((per_day[d].cost for d in span), ZERO)
                at_stake = money_at_stake([(per_day[d], unit.get(d), spend.get(d)) for d in span])
                if at_stake < self.settings.min_impact:
                    continue  # the unit cost moved, the spend did not (e.g. a traffic dip)
                expected = money(actual - at_stake)
                driver = DriverValue("endpoint", endpoint, actual, expected)
                self.findings.append(
                    Finding(
                        team_id, ENDPOINT, endpoint, event.kind, event.first, event.last,
                        event.reported_on, event.ongoing, actual, expected, [driver], ZERO,
                        _chart(result.fits, event.first, event.last, 6),
                        f"{self.data.currency} per 1,000 requests",
                    )
                )  # fmt: skip

    def cluster_series(self) -> None:
        days = self.data.days()
        for cluster, per_day in sorted(self.data.nodes.items()):
            values: list[Decimal | None] = []
            weights: list[Decimal] = []
            for d in days:
                nodes = per_day.get(d, {})
                idle = sum((v[0] for v in nodes.values()), ZERO)
                total = sum((v[1] for v in nodes.values()), ZERO)
                values.append(idle / total if total > 0 else None)
                weights.append(total if total > 0 else ZERO)
            series = (None, CLUSTER_IDLE, cluster)
            result = self._detect(days, values, _accepted_for(self.accepted, series), weights)
            fits = {f.day: f for f in result.fits}
            for event in result.events:
                if not self._wanted(event.first, event.last):
                    continue
                self._cluster_finding(cluster, per_day, fits, event, result.fits)

    def _cluster_finding(
        self,
        cluster: str,
        per_day: Mapping[dt.date, Mapping[str, list[Decimal]]],
        fits: Mapping[dt.date, detector.DayFit],
        event: detector.Event,
        all_fits: Sequence[detector.DayFit],
    ) -> None:
        actual: dict[Cell, Decimal] = {}
        weight: dict[Cell, Decimal] = {}
        base = ZERO
        for d, nodes in per_day.items():
            if not event.first <= d <= event.last:
                continue
            share = fits[d].expected or ZERO
            for node, (idle, total) in nodes.items():
                cell = ("resource", node)
                actual[cell] = actual.get(cell, ZERO) + idle
                weight[cell] = weight.get(cell, ZERO) + share * total
                base += total
        expected = money(event.expected)
        drivers, unexplained = split_drivers(actual, weight, expected)
        self.findings.append(
            Finding(
                None, CLUSTER_IDLE, cluster, event.kind, event.first, event.last,
                event.reported_on, event.ongoing, sum(actual.values(), ZERO), expected, drivers,
                unexplained, _chart(all_fits, event.first, event.last, 6), "idle share",
                share_base=money(base),
            )
        )  # fmt: skip


def _provider_is(provider: str) -> Callable[[str, str], bool]:
    return lambda p, s: p == provider


def _service_is(service: str) -> Callable[[str, str], bool]:
    return lambda p, s: s == service


def _match_cells(
    cells: Mapping[dt.date, Mapping[LedgerCell, Decimal]],
    match: Callable[[str, str], bool],
    first: dt.date,
    last: dt.date,
) -> dict[Cell, Decimal]:
    """The series' cost per cell over [first, last] (cells of one day are distinct per
    LedgerCell, not per Cell: the duplicates are added up)."""
    out: dict[Cell, Decimal] = {}
    for day, day_cells in cells.items():
        if not first <= day <= last:
            continue
        for lc, value in day_cells.items():
            if match(lc.provider, lc.service):
                out[lc.cell] = out.get(lc.cell, ZERO) + value
    return out


def deduplicate(findings: Iterable[Finding]) -> list[Finding]:
    """Drop a finding of a finer team series that overlaps one of a coarser series of the same
    team (see the module docstring). Endpoint and cluster findings are kept as they are."""
    kept: list[Finding] = []
    by_team: dict[int | None, list[Finding]] = {}
    for finding in sorted(findings, key=lambda f: (_COARSENESS.get(f.series_kind, 9), f.first)):
        if finding.series_kind not in _COARSENESS:
            kept.append(finding)
            continue
        earlier = by_team.setdefault(finding.team_id, [])
        if any(
            _COARSENESS[e.series_kind] < _COARSENESS[finding.series_kind]
            and e.first <= finding.last
            and finding.first <= e.last
            for e in earlier
        ):
            continue
        earlier.append(finding)
        kept.append(finding)
    return kept


def build_findings(
    *,
    data: LedgerData,
    endpoints: Mapping[str, Mapping[dt.date, EndpointDay]],
    settings: detector.DetectorSettings,
    accepted: Mapping[tuple[int | None, str, str], list[detector.Accepted]],
    since: dt.date,
    until: dt.date,
    cells: CellsLoader,
) -> list[Finding]:
    builder = FindingsBuilder(data, endpoints, settings, accepted, since, until, cells)
    builder.team_series()
    builder.new_sources()
    builder.endpoint_series()
    builder.cluster_series()
    kept = deduplicate(builder.findings)
    builder.drivers_attach(kept)
    return kept
