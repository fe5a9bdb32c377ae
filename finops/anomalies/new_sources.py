"""New cost sources of a team: services, SKUs and resources that start costing money after the
series' warm-up, grouped per first day. Pure Python and Decimal, no ORM (the findings feed it
cells); the other events of a series are detector.py's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from finops.anomalies.detector import DetectorSettings
from finops.anomalies.expected_value import ZERO

Source = tuple[str, str]  # (dimension, key): ("service", "Amazon S3"), ("sku", ...), ...


@dataclass(frozen=True, slots=True)
class NewSourceEvent:
    first: dt.date
    last: dt.date
    # Each new source with its cost over [first, last]; every one >= min_impact.
    sources: dict[Source, Decimal]

    @property
    def actual(self) -> Decimal:
        return sum(self.sources.values(), ZERO)


def new_sources(
    cells: Mapping[dt.date, Mapping[tuple[str, str, str], Decimal]],
    *,
    series_start: dt.date,
    settings: DetectorSettings | None = None,
) -> list[NewSourceEvent]:
    """New services, SKUs and resources of one team, grouped per first day.

    cells: per day, cost per (service, sku, resource) ("" where unknown). A source is new when
    it first costs something at least min_history days after series_start. A cell's cost goes
    to its coarsest new source (a new service's new SKU is the service), so the sources of an
    event never count a cent twice. A source counts when its cost over its first
    new_source_days days reaches min_impact (money only: a new source is 100 % new).
    """
    s = settings or DetectorSettings()
    first_seen: dict[Source, dt.date] = {}
    for day in sorted(cells):
        for (service, sku, resource), amount in cells[day].items():
            if amount <= 0:
                continue
            for source in (("service", service), ("sku", sku), ("resource", resource)):
                if source[1] and source not in first_seen:
                    first_seen[source] = day
    warm_up_end = series_start + dt.timedelta(days=s.min_history)
    new = {src: d for src, d in first_seen.items() if d >= warm_up_end}
    costs: dict[Source, Decimal] = {}
    last_day: dict[Source, dt.date] = {}
    for day in sorted(cells):
        for (service, sku, resource), amount in cells[day].items():
            label = next(
                (
                    src
                    for src in (("service", service), ("sku", sku), ("resource", resource))
                    if src in new
                    and new[src] <= day < new[src] + dt.timedelta(days=s.new_source_days)
                ),
                None,
            )
            if label is not None and amount:
                costs[label] = costs.get(label, ZERO) + amount
                last_day[label] = max(last_day.get(label, day), day)
    grouped: dict[dt.date, dict[Source, Decimal]] = {}
    for src, cost in costs.items():
        if cost >= s.min_impact:
            grouped.setdefault(new[src], {})[src] = cost
    return [
        NewSourceEvent(first=day, last=max(last_day[src] for src in sources), sources=sources)
        for day, sources in sorted(grouped.items())
    ]
