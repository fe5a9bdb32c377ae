"""Reads of the stored run-economics rollup (finops.economics.models.RunEconomics): a row's
figures as the read-time types (WasteParts, RunEfficiency), so pages and the API show the same
objects whichever way they were computed; the runs that waste most; sums for /metrics."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet

from finops.attribution.models import Category
from finops.attribution.selectors.reporting import visible_to
from finops.core.money import MoneySum, exact_sum
from finops.economics.models import RunEconomics
from finops.energy.selectors import RunEnergy, TeamEnergy, team_energy_of, teams_measured_power
from finops.org.models import Team
from finops.pricing.comparison import MeasuredPower
from finops.run_metrics.selectors import SECONDS_PER_HOUR, RunEfficiency, RunKey
from finops.run_metrics.team_efficiency import TeamMonthEfficiency, team_efficiency_rows
from finops.waste.causes import CAUSES, WasteParts
from finops.waste.selectors import TeamWaste

# WasteParts attribute -> RunEconomics column.
WASTE_COLUMNS = {
    "rework": "waste_rework",
    "restart": "waste_restart",
    "abandoned": "waste_abandoned",
    "cancelled": "waste_cancelled",
    "idle_in_allocation": "waste_idle",
}


def row_waste(row: RunEconomics) -> WasteParts:
    parts = WasteParts()
    for cause, column in WASTE_COLUMNS.items():
        setattr(parts, cause, Decimal(getattr(row, column)))
    parts.estimated_causes = {c for c in row.waste_estimated.split(",") if c in CAUSES}
    return parts


# The whole run's efficiency columns, in the order efficiency_of reads them.
RUN_EFFICIENCY_COLUMNS = (
    "has_metrics", "useful_tokens", "samples", "steps", "currency", "run_cost", "run_gpu_seconds",
    "cost_per_million_tokens", "cost_per_thousand_samples", "tokens_per_gpu_hour", "mfu",
    "flops_per_token", "peak_flops_per_gpu", "peak_source", "gpu_model", "dtype",
)  # fmt: skip
# The columns row_efficiency reads and a row's key: what a read of many rows' efficiency
# loads, not the row's forty others.
EFFICIENCY_COLUMNS = ("team_id", "run_id", "cluster", *RUN_EFFICIENCY_COLUMNS)


def efficiency_of(values: tuple[Any, ...]) -> RunEfficiency | None:
    """The whole run's efficiency from a row's RUN_EFFICIENCY_COLUMNS values (a values_list
    row: no model instance); None when the run has no metrics."""
    (has_metrics, useful_tokens, samples, steps, currency, cost, gpu_seconds, per_million,
     per_thousand_samples, tokens_per_gpu_hour, mfu, flops_per_token, peak, peak_source,
     gpu_model, dtype) = values  # fmt: skip
    if not has_metrics:
        return None
    seconds = Decimal(gpu_seconds)
    return RunEfficiency(
        useful_tokens=useful_tokens,
        samples=samples,
        steps=steps,
        currency=currency,
        cost=cost,
        gpu_hours=seconds / SECONDS_PER_HOUR,
        cost_per_million_tokens=per_million,
        cost_per_thousand_samples=per_thousand_samples,
        tokens_per_gpu_hour=tokens_per_gpu_hour,
        mfu=mfu,
        flops_per_token=flops_per_token,
        peak_flops_per_gpu=peak,
        peak_source=peak_source,
        gpu_model=gpu_model,
        dtype=dtype,
        gpu_seconds=seconds,
    )


def row_efficiency(row: RunEconomics) -> RunEfficiency | None:
    """The whole run's efficiency as stored; None when the run has no metrics."""
    return efficiency_of(tuple(getattr(row, column) for column in RUN_EFFICIENCY_COLUMNS))


@dataclass(frozen=True, slots=True)
class WastefulRun:
    """A run of the month's headline: its waste, the biggest cause, whether it is estimated."""

    team: Team | None
    run_id: str
    cluster: str
    currency: str
    cost: Decimal
    waste: WasteParts
    cause: str

    @property
    def amount(self) -> Decimal:
        return self.waste.total

    @property
    def share(self) -> Decimal | None:
        """The waste's share of the row's cost (None: no cost)."""
        return self.waste.total / self.cost if self.cost > 0 else None

    @property
    def cause_label(self) -> str:
        return self.cause.replace("_", " ")


def runs_wasting_most(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool, limit: int = 5
) -> list[WastefulRun]:
    """The month's training runs with the most waste (rework + restart + abandoned + idle),
    from the stored rollup: ranked on five plain columns of every run (model instances of the
    month's ~7,000 runs took ~1 s of the runs page), then the top rows read whole (2 queries)."""
    rows = visible_to(
        RunEconomics.objects.filter(billing_period=month, category=Category.TRAINING),
        teams=teams,
        include_unowned=include_unowned,
    )
    ranked = sorted(
        (
            (-Decimal(waste), run_id, cluster, currency, pk)
            for pk, waste, run_id, cluster, currency in rows.values_list(
                "pk", "waste_total", "run_id", "cluster", "currency"
            )
            if Decimal(waste) > 0
        )
    )[:limit]
    if not ranked:
        return []
    top = RunEconomics.objects.select_related("team").in_bulk([r[-1] for r in ranked])
    found = []
    for *_key, pk in ranked:
        row = top[pk]
        parts = row_waste(row)
        cause = max((c for c in CAUSES if c != "cancelled"), key=lambda c: (getattr(parts, c), c))
        found.append(
            WastefulRun(row.team, row.run_id, row.cluster, row.currency, row.cost, parts, cause)
        )
    return found


@dataclass(frozen=True, slots=True)
class WasteByCause:
    team_slug: str | None
    month: dt.date
    currency: str
    cause: str
    amount: Decimal


def waste_by_cause(*, months: list[dt.date], teams: QuerySet[Team] | None) -> list[WasteByCause]:
    """Waste per team, month, currency and cause (cancelled included, as its own cause) from
    the stored rollup: one query."""
    rows = RunEconomics.objects.filter(billing_period__in=months)
    if teams is not None:
        rows = rows.filter(team__in=teams)
    sums = (
        rows.order_by()
        .values_list("team__slug", "billing_period", "currency")
        .annotate(**{cause: MoneySum(column) for cause, column in WASTE_COLUMNS.items()})
    )
    found = []
    for team, month, currency, *amounts in sums:
        for cause, amount in zip(WASTE_COLUMNS, amounts, strict=True):
            found.append(WasteByCause(team, month, currency, cause, Decimal(amount or 0)))
    return found


@dataclass(frozen=True, slots=True)
class EnergySum:
    team_slug: str | None
    month: dt.date
    gpu_kwh: Decimal
    facility_kwh: Decimal
    co2e_kg: Decimal | None


def energy_by_team(*, months: list[dt.date], teams: QuerySet[Team] | None) -> list[EnergySum]:
    """GPU and facility kWh and kg CO2e per team and month from the stored rollup."""
    rows = RunEconomics.objects.filter(billing_period__in=months, gpu_kwh__isnull=False)
    if teams is not None:
        rows = rows.filter(team__in=teams)
    sums = (
        rows.order_by()
        .values_list("team__slug", "billing_period")
        .annotate(
            gpu=exact_sum("gpu_kwh", decimal_places=6),
            facility=exact_sum("facility_kwh", decimal_places=6),
            co2e=exact_sum("co2e_kg", decimal_places=6),
        )
    )
    return [
        EnergySum(team, month, Decimal(gpu or 0), Decimal(facility or 0),
                  None if co2e is None else Decimal(co2e))
        for team, month, gpu, facility, co2e in sums
    ]  # fmt: skip


def team_efficiency_stored(*, team: Team, months: list[dt.date]) -> list[TeamMonthEfficiency]:
    """finops.run_metrics.team_efficiency.team_efficiency_by_month, read from the stored
    rollup: each run counts in its last month with its whole-run efficiency. Three queries."""
    wanted = set(months)
    training = RunEconomics.objects.filter(team=team, category=Category.TRAINING)
    ends = {
        (row["run_id"], row["currency"]): row["last"]
        for row in training.order_by()
        .values("run_id", "currency")
        .annotate(last=Max("billing_period"))
        if row["last"] in wanted
    }
    keys: dict[RunKey, dt.date] = {}
    chosen: dict[RunKey, int | None] = {}
    # Each run's first row (by cluster) of its last month decides, as plain values: a team's
    # six months are thousands of rows and only a tenth have metrics; model instances of them
    # all were most of the trend's time. Only the chosen rows with metrics are read whole.
    rows = training.filter(billing_period__in=wanted).order_by("run_id", "cluster")
    for pk, period, run_id, currency, has_metrics in rows.values_list(
        "pk", "billing_period", "run_id", "currency", "has_metrics"
    ):
        if ends.get((run_id, currency)) != period:
            continue
        key = RunKey(team.pk, team.slug, run_id, currency)
        if key not in keys:
            keys[key] = period
            chosen[key] = pk if has_metrics else None
    measured = RunEconomics.objects.only(*EFFICIENCY_COLUMNS).in_bulk(
        [pk for pk in chosen.values() if pk is not None]
    )
    found: dict[RunKey, RunEfficiency | None] = {
        key: None if pk is None else row_efficiency(measured[pk]) for key, pk in chosen.items()
    }
    return team_efficiency_rows(keys, found)


def teams_bought_stored(
    *, month: dt.date, teams: dict[int, Team]
) -> dict[tuple[int, str], TeamMonthEfficiency]:
    """What each team's training runs that ended in the month bought (finops.chargeback
    .economics' `_bought`, the read-time reference), per (team, currency), from the stored
    rollup: each run's whole-run efficiency as stored on its rows. Two queries, whatever the
    number of teams and runs."""
    # A run ended in the month when it has no training row in a later month (the
    # (team, run_id, currency) index answers each probe). Each run's first row (by cluster)
    # decides, read as four plain values; only the chosen rows with metrics (a sixth of a demo
    # team's runs) are read whole. Issue 29, h-pages: every row's sixteen columns and a RunKey
    # per run were most of this read (54 -> 17 ms for the language team's 1,506 runs).
    later = RunEconomics.objects.filter(
        team_id=OuterRef("team_id"),
        run_id=OuterRef("run_id"),
        currency=OuterRef("currency"),
        category=Category.TRAINING,
        billing_period__gt=month,
    )
    rows = (
        RunEconomics.objects.filter(
            team_id__in=list(teams), category=Category.TRAINING, billing_period=month
        )
        .filter(~Exists(later))
        .order_by("team_id", "run_id", "cluster")
        .values_list("team_id", "run_id", "currency", "has_metrics", "pk")
    )
    chosen: dict[tuple[int, str, str], int | None] = {}
    for team_id, run_id, currency, has_metrics, pk in rows:
        chosen.setdefault((team_id, run_id, currency), pk if has_metrics else None)
    measured = {
        pk: efficiency_of(tuple(values))
        for pk, *values in RunEconomics.objects.filter(
            pk__in=[pk for pk in chosen.values() if pk is not None]
        ).values_list("pk", *RUN_EFFICIENCY_COLUMNS)
    }
    ends: dict[int, dict[RunKey, dt.date]] = defaultdict(dict)
    found: dict[RunKey, RunEfficiency | None] = {}
    without: dict[tuple[int, str], int] = defaultdict(int)
    for (team_id, run_id, currency), first in chosen.items():
        efficiency = measured[first] if first is not None else None
        if efficiency is None:
            # What team_efficiency_rows counts of such a run, without building its key.
            without[(team_id, currency)] += 1
            continue
        key = RunKey(team_id, teams[team_id].slug, run_id, currency)
        ends[team_id][key] = month
        found[key] = efficiency
    result = {
        (team_id, efficiency.currency): efficiency
        for team_id, keys in ends.items()
        for efficiency in team_efficiency_rows(keys, found)
    }
    for (team_id, currency), count in without.items():
        row = result.get((team_id, currency))
        if row is None:
            row = result[(team_id, currency)] = TeamMonthEfficiency(
                month=month, currency=currency
            ).finish()
        row.runs_without_metrics += count
    return result


def team_months_waste_stored(
    *, months: list[dt.date], teams: QuerySet[Team], include_unowned: bool
) -> dict[dt.date, list[TeamWaste]]:
    """finops.waste.selectors.team_months_waste (the read-time reference) from the stored
    rollup: per month, team and currency, the runs, their cost and their parts by cause. Three
    queries whatever the number of months and runs."""
    rows = visible_to(
        RunEconomics.objects.filter(billing_period__in=months),
        teams=teams,
        include_unowned=include_unowned,
    ).order_by()
    sums = rows.values_list("billing_period", "team_id", "currency").annotate(
        runs=Count("run_id", distinct=True),
        cost_sum=MoneySum("cost"),
        **{f"{cause}_sum": MoneySum(column) for cause, column in WASTE_COLUMNS.items()},
    )
    estimated: dict[tuple[dt.date, int | None, str], set[str]] = {}
    for month, team_id, currency, causes in (
        rows.exclude(waste_estimated="")
        .values_list("billing_period", "team_id", "currency", "waste_estimated")
        .distinct()
    ):
        found = estimated.setdefault((month, team_id, currency), set())
        found |= {c for c in causes.split(",") if c in CAUSES}
    grouped = list(sums)
    team_of = Team.objects.in_bulk({t for _, t, *_ in grouped if t is not None})
    result: dict[dt.date, list[TeamWaste]] = {month: [] for month in months}
    for month, team_id, currency, runs, cost, *amounts in grouped:
        parts = WasteParts()
        for cause, amount in zip(WASTE_COLUMNS, amounts, strict=True):
            setattr(parts, cause, Decimal(amount or 0))
        parts.estimated_causes = estimated.get((month, team_id, currency), set())
        team = None if team_id is None else team_of[team_id]
        result[month].append(TeamWaste(team, currency, Decimal(cost or 0), runs, parts))
    for month_rows in result.values():
        month_rows.sort(key=lambda r: (r.team is None, r.team.slug if r.team else "", r.currency))
    return result


_ENERGY_COLUMNS = (
    "team_id", "run_id", "gpu_kwh", "measured_kwh", "estimated_kwh", "facility_kwh", "co2e_kg",
    "co2e_missing_kwh", "pue", "pue_source", "grid_g_per_kwh", "grid_source", "grid_year",
    "power_source", "energy_estimated",
)  # fmt: skip


def team_month_energy_stored(*, month: dt.date, team_ids: Iterable[int | None]) -> list[TeamEnergy]:
    """finops.energy.selectors.team_month_energy (the read-time reference) from the stored
    rollup, each run's rows (one per cluster) merged, summed per team: two queries. Its
    measured_gpu_hours are 0 (not stored: the measured power reads them at read time)."""
    wanted = set(team_ids)
    ids = [t for t in wanted if t is not None]
    selected = Q(team_id__in=ids)
    if None in wanted:
        selected |= Q(team__isnull=True)
    rows = list(
        RunEconomics.objects.filter(selected, billing_period=month, gpu_kwh__isnull=False)
        .order_by("team_id", "run_id", "cluster", "currency")
        .values_list(*_ENERGY_COLUMNS)
    )
    if not rows:
        return []
    slugs = dict(Team.objects.filter(pk__in=ids).values_list("pk", "slug"))
    by_run: dict[tuple[int | None, str], list[tuple[Any, ...]]] = defaultdict(list)
    for team_id, run_id, *figures in rows:
        by_run[(team_id, run_id)].append(tuple(figures))
    parts: dict[str, list[RunEnergy]] = defaultdict(list)
    for (team_id, _run_id), clusters in by_run.items():
        slug = slugs.get(team_id, "") if team_id is not None else ""
        parts[slug].append(_run_energy(clusters))
    return [
        team_energy_of(slug=slug, month=month, parts=found, runs=len(found))
        for slug, found in sorted(parts.items())
    ]


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(value)


def _run_energy(clusters: list[tuple[Any, ...]]) -> RunEnergy:
    """A run's month of energy from its rows (one per cluster), as finops.energy.selectors
    .energies gives it over all its clusters: figures summed; the PUE and grid intensity
    only when every row had the same single one (else the run's parts differ: None)."""
    run = RunEnergy(co2e_kg=None)
    factors = set()
    for row in clusters:
        gpu, measured, estimated, facility, co2e, missing, *shared, power, estimated_flag = row
        run.gpu_kwh += Decimal(gpu)
        run.measured_kwh += Decimal(measured)
        run.estimated_kwh += Decimal(estimated)
        run.facility_kwh += Decimal(facility)
        if co2e is not None:
            run.co2e_kg = (run.co2e_kg or Decimal(0)) + Decimal(co2e)
        run.co2e_missing_kwh += Decimal(missing or 0)
        run.estimated = run.estimated or estimated_flag
        factors.add((_decimal(shared[0]), shared[1], _decimal(shared[2]), *shared[3:]))
        if power:
            run.power_source = "; ".join(sorted({*run.power_source.split("; "), power} - {""}))
    if len(factors) == 1:
        pue, pue_source, grid, grid_source, grid_year = next(iter(factors))
        if pue is not None:
            run.pue, run.pue_source = pue, pue_source
            run.grid_g_per_kwh, run.grid_source, run.grid_year = grid, grid_source, grid_year
    return run


def teams_measured_power_stored(
    *, month: dt.date, team_ids: Iterable[int]
) -> dict[int, MeasuredPower]:
    """finops.energy.selectors.teams_measured_power, computed at read time only for the teams
    whose stored run economics hold measured (DCGM) GPU energy, or hold no energy at all: the
    rest measured nothing, so their power is the nameplate's. A month without DCGM energy then
    costs two queries instead of every run's energy."""
    ids = list(team_ids)
    rows = RunEconomics.objects.filter(
        billing_period=month, team_id__in=ids, gpu_kwh__isnull=False
    ).order_by()
    stored = set(rows.values_list("team_id", flat=True).distinct())
    measured = set(rows.filter(measured_kwh__gt=0).values_list("team_id", flat=True).distinct())
    live = [pk for pk in ids if pk not in stored or pk in measured]
    return teams_measured_power(month=month, team_ids=live) if live else {}
