"""Energy and carbon of a bill's line items (the FOCUS export's x_ columns).

A line item of a GPU node (its ResourceName or ResourceId is a node of the ledger's job rows)
carries the energy of the jobs that ran on that node during the line's charge period:
- each job attempt's energy on the node (measured: its JobEnergy joules; else estimated like a
  run's: the ledger's GPU-seconds of the attempt on the node x the power of the node's GPU model
  at the job's measured utilisation, or at full power when unknown) is spread evenly over the
  attempt's time [start, end) (as finops.energy.selectors.month_share does across months);
- the line gets the part of that time inside [ChargePeriodStart, ChargePeriodEnd).
Facility kWh = GPU kWh x the PUE of the line's provider and region (else the on-prem setting),
kg CO2e = facility kWh x the grid intensity of the region's country / 1000; each rounded
half-even to 6 places, like the run and team figures. GPU time no job held (idle nodes) has no
energy here, and a line of no GPU node (storage, network, support) has none: null.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from billing_ingest.models import JobRecord
from finops.attribution.models import AllocatedCost
from finops.core.money import exact_sum
from finops.energy.factors import (
    CTX,
    JOULES_PER_KWH,
    Pue,
    chunks,
    estimated_kwh,
    gpu_power,
    round_kwh,
)
from finops.energy.figures import grid_intensity, region_country
from finops.energy.selectors import jobs_measured, node_facts

ENERGY_COLUMNS = ("x_GpuEnergyKWh", "x_EnergyKWh", "x_CarbonKgCO2e", "x_EnergyMethod")


@dataclass(frozen=True, slots=True)
class Span:
    """One job attempt's GPU energy on one node, spread over [start, end)."""

    start: datetime
    end: datetime
    kwh: Decimal
    estimated: bool


def _seconds(start: datetime, end: datetime) -> int:
    return max(0, int((end - start).total_seconds()))


_Job = tuple[str, str, int, datetime | None, datetime | None]


def _job_node_seconds(month: date) -> dict[int, dict[str, Decimal]]:
    """The ledger's GPU-seconds of the month per job record and node."""
    rows = (
        AllocatedCost.objects.filter(billing_period=month, gpu_seconds__gt=0, job__isnull=False)
        .exclude(node="")
        .order_by()
        .values("job_id", "node")
        .annotate(seconds=exact_sum("gpu_seconds", decimal_places=6))
    )
    seconds: dict[int, dict[str, Decimal]] = defaultdict(dict)
    for row in rows:
        seconds[row["job_id"]][row["node"]] = Decimal(row["seconds"])
    return seconds


def _jobs(seconds: dict[int, dict[str, Decimal]]) -> dict[int, _Job]:
    jobs: dict[int, _Job] = {}
    for chunk in chunks(seconds):
        for pk, cluster, job_id, attempt, start, end in JobRecord.objects.filter(
            pk__in=chunk
        ).values_list("pk", "cluster", "job_id", "attempt", "start", "end"):
            jobs[pk] = (cluster, job_id, attempt, start, end)
    return jobs


class MonthLineEnergy:
    """The spans of every GPU node of a billing month, read once (a few queries per 500 jobs);
    `columns(item)` gives a line item's x_ energy columns."""

    def __init__(self, month: date) -> None:
        self.spans: dict[str, list[Span]] = defaultdict(list)
        self._pue = Pue()
        seconds = _job_node_seconds(month)
        jobs = _jobs(seconds)
        measured, utilisation = jobs_measured(job[:3] for job in jobs.values())
        self.facts = node_facts({n for by_node in seconds.values() for n in by_node}, [month])
        for pk, by_node in seconds.items():
            job = jobs.get(pk)
            if job is None:
                continue
            cluster, job_id, attempt, start, end = job
            if start is None or end is None:
                continue
            got = measured.get((cluster, job_id, attempt))
            if got:
                for node, joules in got.items():
                    kwh = CTX.divide(joules, JOULES_PER_KWH)
                    self.spans[node].append(Span(start, end, kwh, False))
                continue
            u = utilisation.get((cluster, job_id), Decimal(1))
            for node, s in by_node.items():
                fact = self.facts.get(node)
                power = gpu_power(fact.gpu_model if fact else "")
                if power is not None:
                    self.spans[node].append(Span(start, end, estimated_kwh(s, u, power), True))

    def columns(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """x_GpuEnergyKWh, x_EnergyKWh (facility), x_CarbonKgCO2e and x_EnergyMethod
        (measured, estimated or mixed) of a line item; null where it carries no energy."""
        empty: dict[str, Any] = dict.fromkeys(ENERGY_COLUMNS)
        node = next(
            (n for n in (item["resource_name"], item["resource_id"]) if n and n in self.spans),
            None,
        )
        start, end = item["charge_period_start"], item["charge_period_end"]
        if node is None or start is None or end is None:
            return empty
        gpu = Decimal(0)
        kinds: set[bool] = set()
        for span in self.spans[node]:
            inside = _seconds(max(start, span.start), min(end, span.end))
            length = _seconds(span.start, span.end)
            if not inside or not length:
                continue
            gpu += CTX.divide(span.kwh * inside, Decimal(length)) if inside < length else span.kwh
            kinds.add(span.estimated)
        if not kinds:
            return empty
        gpu = round_kwh(gpu)
        facility = round_kwh(gpu * self._pue.of(item["provider_name"], item["region_id"]).value)
        country = region_country(item["region_id"] or "")
        grid = grid_intensity(country) if country else None
        carbon = round_kwh(CTX.divide(facility * grid.value, Decimal(1000))) if grid else None
        method = "mixed" if len(kinds) > 1 else ("estimated" if True in kinds else "measured")
        return {
            "x_GpuEnergyKWh": gpu,
            "x_EnergyKWh": facility,
            "x_CarbonKgCO2e": carbon,
            "x_EnergyMethod": method,
        }
