"""Energy and carbon of a run, a team and a month (DESIGN section 9), joined at read time.

For each job attempt of the run (the attribution ledger's GPU rows of the run, every attempt):
- measured: the JobEnergy rows DCGM gave for the attempt (every node it measured), times the
  share of the attempt's time inside the months asked for (month_share);
- else estimated (`estimated: true`): the ledger's GPU-seconds of the attempt on each node x
  (idle + utilisation x (max - idle)) of the node's GPU model (figures.GPU_POWER), utilisation
  the job's measured one (JobGpuUtilisation) or 1 when unknown. A node whose GPU model has no
  power figure is left out and said so in `notes`.
Per node, the PUE of its provider and region (figures.PUE; no known provider: the pricing
settings' on-prem PUE) and the grid intensity of its region's country (figures.grid_intensity;
unknown: no CO2e for that part, said in `notes`). Rounding: GPU kWh per (PUE, intensity) group
to 6 places, facility kWh = that x PUE, kg CO2e = facility kWh x g/kWh / 1000, each to 6 places
half-even, so the figures shown reproduce exactly from the PUE and intensity shown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from django.db.models import Exists, OuterRef, Q

from billing_ingest.models import CostLineItem, JobGpuUtilisation, JobRecord
from finops.attribution.inputs.catalogue import line_gpu_spec
from finops.attribution.models import AllocatedCost, RunCost
from finops.core.money import exact_sum
from finops.core.months import month_format
from finops.core.sql_arrays import AnyOf, epoch_micros, from_epoch_micros
from finops.energy.factors import (
    CTX,
    JOULES_PER_KWH,
    SECONDS_PER_HOUR,
    Pue,
    estimated_kwh,
    gpu_power,
    round_kwh,
)
from finops.energy.figures import Sourced, grid_intensity, region_country
from finops.energy.models import JobEnergy
from finops.org.models import Team
from finops.pricing.comparison import MeasuredPower
from finops.run_metrics.selectors import RunKey


@dataclass(frozen=True, slots=True)
class NodeFacts:
    provider: str
    region: str
    gpu_model: str


@dataclass(slots=True)
class RunEnergy:
    gpu_kwh: Decimal = Decimal(0)
    measured_kwh: Decimal = Decimal(0)
    estimated_kwh: Decimal = Decimal(0)
    facility_kwh: Decimal = Decimal(0)
    # Of the energy with a grid intensity; None when none has one. co2e_missing_kwh: the
    # facility kWh left out (regions with no intensity: `notes` names them).
    co2e_kg: Decimal | None = Decimal(0)
    co2e_missing_kwh: Decimal = Decimal(0)
    # The PUE and intensity applied; None when parts had different ones (see `parts`).
    pue: Decimal | None = None
    grid_g_per_kwh: Decimal | None = None
    pue_source: str = ""
    grid_source: str = ""
    grid_year: str = ""
    power_source: str = ""
    estimated: bool = False
    # GPU-hours (the ledger's) of the attempts whose energy was measured.
    measured_gpu_hours: Decimal = Decimal(0)
    parts: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _team(key: RunKey) -> Q:
    return Q(team__isnull=True) if key.team_id is None else Q(team_id=key.team_id)


def node_facts(nodes: Iterable[str], months: list[date]) -> dict[str, NodeFacts]:
    """Provider, region and GPU model of each node, from its line items of those months."""
    names = set(nodes)
    if not names:
        return {}
    lines = (
        CostLineItem.objects.settled()
        .filter(billing_period__in=months)
        .filter(Q(resource_name__in=names) | Q(resource_id__in=names))
        .values_list("resource_name", "resource_id", "provider_name", "region_id",
                     "x_instance_type", "x_gpu_count", "x_gpu_model", "sku_id", "resource_type")
        .distinct()
        .order_by()
    )  # fmt: skip
    facts: dict[str, NodeFacts] = {}
    for name, rid, provider, region, x_type, x_count, x_model, sku, res_type in lines:
        spec = line_gpu_spec(
            x_instance_type=x_type, x_gpu_count=x_count, x_gpu_model=x_model, sku_id=sku,
            resource_type=res_type,
        )  # fmt: skip
        for node in (name, rid):
            if node in names and node not in facts:
                facts[node] = NodeFacts(provider, region, spec.model if spec else "")
    return facts


# (team id, run id): a run as the ledger names it.
RunRef = tuple[int | None, str]


def jobs_measured(
    jobs: Iterable[tuple[str, str, int]],
) -> tuple[dict[tuple[str, str, int], dict[str, Decimal]], dict[tuple[str, str], Decimal]]:
    """DCGM joules per (cluster, job id, attempt) and node, and measured GPU utilisation per
    (cluster, job id), of these jobs: two queries per cluster and 500 job ids."""
    measured: dict[tuple[str, str, int], dict[str, Decimal]] = defaultdict(dict)
    utilisation: dict[tuple[str, str], Decimal] = {}
    by_cluster: dict[str, set[str]] = defaultdict(set)
    for cluster, job_id, _attempt in jobs:
        by_cluster[cluster].add(job_id)
    for cluster, ids in by_cluster.items():
        # The ids as one array (finops.core.sql_arrays): a month's are hundreds of thousands.
        for job_id, attempt, node, joules in JobEnergy.objects.filter(
            AnyOf("job_id", ids), cluster=cluster
        ).values_list("job_id", "attempt", "node", "joules"):
            measured[(cluster, job_id, attempt)][node] = joules
        for job_id, value in JobGpuUtilisation.objects.filter(
            AnyOf("job_id", ids), cluster=cluster
        ).values_list("job_id", "utilisation"):
            utilisation[(cluster, job_id)] = value
    return measured, utilisation


def run_energy(key: RunKey, months: list[date] | None = None) -> RunEnergy | None:
    """The run's energy over `months` (default: every month the run has cost in); None when
    the run has no GPU time in the ledger."""
    if months is None:
        months = sorted(
            set(
                RunCost.objects.filter(_team(key), run_id=key.run_id)
                .values_list("billing_period", flat=True)
                .order_by()
            )
        )
    found = energies(months=months, runs=_team(key) & Q(run_id=key.run_id))
    return found.get((key.team_id, key.run_id))


def energies(
    *, months: list[date], runs: Q, known: dict[str, NodeFacts | None] | None = None
) -> dict[RunRef, RunEnergy]:
    """Energy of every run of the ledger rows `runs` selects over `months`: a fixed number of
    queries however many runs (the team page sums a month of them). `known`: the node facts
    of `months` read by an earlier call (None: no line item), used and filled in, so that a
    month taken in chunks of runs reads each node's once (the chunks name the same nodes)."""
    ledger = (
        AllocatedCost.objects.filter(
            runs, billing_period__in=months, gpu_seconds__gt=0, job__isnull=False
        )
        .exclude(node="")
        .exclude(run_id="")
        .order_by()
        .values("team_id", "run_id", "job_id", "node")
        .annotate(seconds=exact_sum("gpu_seconds", decimal_places=6))
    )
    seconds: dict[RunRef, dict[int, dict[str, Decimal]]] = defaultdict(lambda: defaultdict(dict))
    for row in ledger:
        seconds[(row["team_id"], row["run_id"])][row["job_id"]][row["node"]] = Decimal(
            row["seconds"]
        )
    if not seconds:
        return {}
    pks = {pk for by_job in seconds.values() for pk in by_job}
    jobs: dict[int, tuple[str, str, int]] = {}
    # Share of each job's time inside the months: what of its measured energy they hold.
    within: dict[int, Decimal] = {}
    # One query (the ids as one array), the times as integers (finops.core.sql_arrays).
    wanted = JobRecord.objects.filter(AnyOf("pk", pks))
    for pk, cluster, job_id, attempt, start, end in wanted.values_list(
        "pk", "cluster", "job_id", "attempt", epoch_micros(wanted, "start"),
        epoch_micros(wanted, "end"),
    ):  # fmt: skip
        jobs[pk] = (cluster, job_id, attempt)
        within[pk] = month_share(from_epoch_micros(start), from_epoch_micros(end), months)
    measured, utilisation = jobs_measured(jobs.values())
    nodes = {n for by_job in seconds.values() for by_node in by_job.values() for n in by_node}
    nodes |= {n for by_node in measured.values() for n in by_node}
    if known is None:
        facts = node_facts(nodes, months)
    else:
        new = nodes - known.keys()
        found = node_facts(new, months)
        known.update((node, found.get(node)) for node in new)
        facts = {node: fact for node in nodes if (fact := known[node]) is not None}
    factors = _Factors(facts)
    result: dict[RunRef, RunEnergy] = {}
    for ref, by_job in seconds.items():
        result[ref] = _run_energy(by_job, jobs, within, measured, utilisation, factors)
    return result


def measured_gpu_hours_of_team(*, month: date, team_id: int | None) -> Decimal:
    """The team's month of GPU-hours that DCGM measured (TeamEnergy.measured_gpu_hours, what
    the measured power divides by), without the rest of `energies`: its ledger rows of jobs
    with energy rows, summed as `energies` and team_energy_of sum them (per job: its nodes'
    seconds / 3600, added per run in job order, runs added in turn): the same Decimal. None:
    the runs of no team."""
    has_energy = JobEnergy.objects.filter(
        cluster=OuterRef("job__cluster"),
        job_id=OuterRef("job__job_id"),
        attempt=OuterRef("job__attempt"),
    )
    rows = (
        AllocatedCost.objects.filter(
            Q(team__isnull=True) if team_id is None else Q(team_id=team_id),
            billing_period=month,
            gpu_seconds__gt=0,
            job__isnull=False,
        )
        .exclude(node="")
        .exclude(run_id="")
        .filter(Exists(has_energy))
        .order_by()
        .values("run_id", "job_id", "node")
        .annotate(seconds=exact_sum("gpu_seconds", decimal_places=6))
    )
    by_run: dict[str, dict[int, list[Decimal]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_run[row["run_id"]][row["job_id"]].append(Decimal(row["seconds"]))
    total = Decimal(0)
    for by_job in by_run.values():
        hours = Decimal(0)
        for _pk, seconds in sorted(by_job.items()):
            hours += sum(seconds, Decimal(0)) / SECONDS_PER_HOUR
        total += hours
    return total


def month_share(start: datetime | None, end: datetime | None, months: list[date]) -> Decimal:
    """The share of a job's time [start, end) inside the calendar months given (UTC): measured
    energy is not split by time, so a job running across a month's end puts that share of its
    energy in each month (evenly over time). A job still running counts to now; one with no
    start, or no length, counts whole."""
    if start is None:
        return Decimal(1)
    stop = end or datetime.now(tz=UTC)
    length = int((stop - start).total_seconds())
    if length <= 0:
        return Decimal(1)
    inside = 0
    for month in months:
        first = datetime(month.year, month.month, 1, tzinfo=UTC)
        after = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
        inside += max(0, int((min(stop, after) - max(start, first)).total_seconds()))
    if inside >= length:
        return Decimal(1)
    return CTX.divide(Decimal(inside), Decimal(length))


def _run_energy(
    by_job: dict[int, dict[str, Decimal]],
    jobs: dict[int, tuple[str, str, int]],
    within: dict[int, Decimal],
    measured: dict[tuple[str, str, int], dict[str, Decimal]],
    utilisation: dict[tuple[str, str], Decimal],
    factors: _Factors,
) -> RunEnergy:
    # node -> [measured kWh, estimated kWh]
    per_node: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    result = RunEnergy()
    power_sources: set[str] = set()
    for pk, by_node in sorted(by_job.items()):
        job = jobs.get(pk)
        if job is None:
            continue
        got = measured.get(job)
        if got:
            result.measured_gpu_hours += sum(by_node.values(), Decimal(0)) / SECONDS_PER_HOUR
            for node, joules in got.items():
                share = within.get(pk, Decimal(1))
                per_node[node][0] += CTX.divide(joules * share, JOULES_PER_KWH)
            continue
        u = utilisation.get((job[0], job[1]), Decimal(1))
        for node, s in sorted(by_node.items()):
            model, power, sources = factors.power(node)
            if power is None:
                result.notes.append(
                    f"{round_kwh(s / SECONDS_PER_HOUR)} GPU-hours on {node} not estimated: "
                    f"no power figure for GPU model {model or 'unknown'}"
                )
                continue
            per_node[node][1] += estimated_kwh(s, u, power)
            power_sources |= sources
    result.power_source = "; ".join(sorted(power_sources))
    _apply_factors(result, per_node, factors)
    return result


class _Factors:
    """PUE and grid intensity per node (the on-prem PUE read once, when needed), and each
    node's GPU power: looked up once per node, not once per run and job on it (a month's runs
    name the same nodes tens of thousands of times)."""

    def __init__(self, facts: dict[str, NodeFacts]) -> None:
        self.facts = facts
        self._pue = Pue()
        self._places: dict[str, tuple[NodeFacts, Sourced, Sourced | None]] = {}
        self._powers: dict[str, tuple[str, tuple[Sourced, Sourced] | None, frozenset[str]]] = {}

    def pue(self, fact: NodeFacts) -> Sourced:
        return self._pue.of(fact.provider, fact.region)

    def place(self, node: str) -> tuple[NodeFacts, Sourced, Sourced | None]:
        """The node's facts, PUE and grid intensity (None: none known for its region)."""
        found = self._places.get(node)
        if found is None:
            fact = self.facts.get(node, NodeFacts("", "", ""))
            country = region_country(fact.region)
            grid = grid_intensity(country) if country else None
            found = self._places[node] = (fact, self.pue(fact), grid)
        return found

    def power(self, node: str) -> tuple[str, tuple[Sourced, Sourced] | None, frozenset[str]]:
        """The node's GPU model, its idle and maximum power (None: no figure), and the
        sources of those figures as the run's power_source names them."""
        found = self._powers.get(node)
        if found is None:
            model = self.facts[node].gpu_model if node in self.facts else ""
            power = gpu_power(model)
            sources: frozenset[str] = frozenset()
            if power is not None:
                idle, peak = power
                sources = frozenset(
                    {f"idle {idle.value} W: {idle.source}", f"max {peak.value} W: {peak.source}"}
                )
            found = self._powers[node] = (model, power, sources)
        return found


def _apply_factors(
    result: RunEnergy, per_node: dict[str, list[Decimal]], factors: _Factors
) -> None:
    groups: dict[tuple[Sourced, Sourced | None], list[Decimal]] = defaultdict(
        lambda: [Decimal(0), Decimal(0)]
    )
    for node, (measured, estimated) in sorted(per_node.items()):
        fact, pue, grid = factors.place(node)
        if grid is None:
            result.notes.append(
                f"no grid intensity for node {node} (region {fact.region or 'unknown'}): "
                "its CO2e is not counted"
            )
        groups[(pue, grid)][0] += measured
        groups[(pue, grid)][1] += estimated
    co2e = Decimal(0)
    known = False
    for (pue, grid), (measured, estimated) in groups.items():
        gpu = round_kwh(measured + estimated)
        facility = round_kwh(gpu * pue.value)
        result.measured_kwh += round_kwh(measured)
        result.estimated_kwh += round_kwh(estimated)
        result.gpu_kwh += gpu
        result.facility_kwh += facility
        part = {"gpu_kwh": f"{gpu:f}", "pue": f"{pue.value:f}", "pue_source": pue.source,
                "facility_kwh": f"{facility:f}"}  # fmt: skip
        if grid is None:
            result.co2e_missing_kwh += facility
        else:
            kg = round_kwh(CTX.divide(facility * grid.value, Decimal(1000)))
            co2e += kg
            known = True
            part |= {"grid_g_per_kwh": f"{grid.value:f}", "grid_source": grid.source,
                     "grid_year": grid.date, "co2e_kg": f"{kg:f}"}  # fmt: skip
        result.parts.append(part)
    result.co2e_kg = co2e if known else None
    result.estimated = result.estimated_kwh > 0
    if len(groups) == 1:
        (pue, grid), _ = next(iter(groups.items()))
        result.pue, result.pue_source = pue.value, pue.source
        if grid is not None:
            result.grid_g_per_kwh, result.grid_source = grid.value, grid.source
            result.grid_year = grid.date


@dataclass(frozen=True, slots=True)
class TeamEnergy:
    team: str
    month: str
    runs: int
    gpu_kwh: Decimal
    measured_kwh: Decimal
    estimated_kwh: Decimal
    facility_kwh: Decimal
    # Of the runs' energy with a grid intensity (None: none has one); co2e_missing_kwh the
    # facility kWh without one.
    co2e_kg: Decimal | None
    estimated: bool
    co2e_missing_kwh: Decimal = Decimal(0)
    measured_gpu_hours: Decimal = Decimal(0)
    # Shown when every run had the same (else None / ""; the runs' own pages show theirs).
    pue: Decimal | None = None
    pue_source: str = ""
    grid_g_per_kwh: Decimal | None = None
    grid_source: str = ""
    grid_year: str = ""
    power_source: str = ""


def team_month_energy(*, month: date, team_ids: Iterable[int | None]) -> list[TeamEnergy]:
    """Sum of the month's runs' energy per team (each run over that month's ledger only)."""
    wanted = set(team_ids)
    ids = [t for t in wanted if t is not None]
    selected = Q(team_id__in=ids)
    if None in wanted:
        selected |= Q(team__isnull=True)
    found = energies(months=[month], runs=selected)
    if not found:
        return []
    slugs = dict(Team.objects.filter(pk__in=ids).values_list("pk", "slug"))
    sums: dict[str, list[RunEnergy]] = defaultdict(list)
    for (team_id, _run_id), energy in found.items():
        sums[slugs.get(team_id, "") if team_id is not None else ""].append(energy)
    return [
        team_energy_of(slug=slug, month=month, parts=runs, runs=len(runs))
        for slug, runs in sorted(sums.items())
    ]


def team_energy_of(*, slug: str, month: date, parts: list[RunEnergy], runs: int) -> TeamEnergy:
    """A team's month of energy from its runs' (or its runs' parts': the stored rollup has
    one per cluster) RunEnergy."""
    co2 = [e.co2e_kg for e in parts]
    return TeamEnergy(
        team=slug, month=month_format(month), runs=runs,
        gpu_kwh=sum((e.gpu_kwh for e in parts), Decimal(0)),
        measured_kwh=sum((e.measured_kwh for e in parts), Decimal(0)),
        estimated_kwh=sum((e.estimated_kwh for e in parts), Decimal(0)),
        facility_kwh=sum((e.facility_kwh for e in parts), Decimal(0)),
        co2e_kg=(None if all(c is None for c in co2)
                 else sum((c or Decimal(0) for c in co2), Decimal(0))),
        co2e_missing_kwh=sum((e.co2e_missing_kwh for e in parts), Decimal(0)),
        measured_gpu_hours=sum((e.measured_gpu_hours for e in parts), Decimal(0)),
        estimated=any(e.estimated for e in parts),
        **_shared_factors(parts),
    )  # fmt: skip


def _shared_factors(energies: list[RunEnergy]) -> dict[str, Any]:
    """The PUE and grid intensity (with sources) when all runs used the same ones."""
    shared: dict[str, Any] = {}
    pues = {(e.pue, e.pue_source) for e in energies}
    if len(pues) == 1 and None not in next(iter(pues)):
        shared["pue"], shared["pue_source"] = next(iter(pues))
    grids = {(e.grid_g_per_kwh, e.grid_source, e.grid_year) for e in energies}
    if len(grids) == 1 and None not in next(iter(grids)):
        shared["grid_g_per_kwh"], shared["grid_source"], shared["grid_year"] = next(iter(grids))
    shared["power_source"] = "; ".join(
        sorted({part for e in energies if e.power_source for part in e.power_source.split("; ")})
    )
    return shared


def measured_power(energy: RunEnergy | TeamEnergy | None) -> MeasuredPower | None:
    """What the pricing comparison's on-prem power reads: the measured GPU kWh and the
    GPU-hours they cover (None when nothing was measured)."""
    if energy is None or not energy.measured_kwh or not energy.measured_gpu_hours:
        return None
    return MeasuredPower(kwh=energy.measured_kwh, gpu_hours=energy.measured_gpu_hours)


def teams_measured_power(*, month: date, team_ids: Iterable[int]) -> dict[int, MeasuredPower]:
    """measured_power of each team's runs in the month, by team id."""
    ids = list(team_ids)
    rows = team_month_energy(month=month, team_ids=ids)
    slugs = dict(Team.objects.filter(pk__in=ids).values_list("slug", "pk")) if rows else {}
    found = {}
    for row in rows:
        power = measured_power(row)
        if power is not None and row.team in slugs:
            found[slugs[row.team]] = power
    return found
