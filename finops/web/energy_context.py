"""Energy and emissions shown on the run and team pages (finops/energy/selectors.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from decimal import Decimal

from django.db.models import Max, QuerySet

from finops.economics.energy_selectors import team_month_energy_summed
from finops.economics.selectors import team_month_energy_stored
from finops.energy.endpoint_selectors import EndpointEnergy, endpoint_energy
from finops.energy.models import JobEnergy
from finops.energy.selectors import (
    RunEnergy,
    TeamEnergy,
    measured_gpu_hours_of_team,
    run_energy,
    team_month_energy,
)
from finops.inference.selectors import EndpointMonth
from finops.org.models import Team
from finops.run_metrics.selectors import RunKey
from finops.web.page_cache import panel_cached


def run_month_energy(*, team: Team, run_id: str, month: date) -> RunEnergy | None:
    """The run's energy over the month the page shows."""
    return run_energy(RunKey(team.pk, team.slug, run_id, ""), [month])


def team_energy(*, team: Team, month: date) -> TeamEnergy | None:
    """The team's month of energy as the run-economics step stored it (the figures the
    read-time team_month_energy gives, tests/economics/test_team_energy_stored.py); a month
    not stored yet from team_energy_of_runs (stale: at read time, team_month_energy_summed)."""
    rows = team_month_energy_summed(month=month, team_ids=[team.pk])
    if rows is None:
        return team_energy_of_runs(team=team, month=month)
    return rows[0] if rows else None


def team_energy_of_runs(*, team: Team, month: date) -> TeamEnergy | None:
    """The team's month of energy from the stored run rows (finops.economics: the figures the
    read-time team_month_energy gives, tests/economics/test_stored_readers.py), with the
    measured GPU-hours the rollup does not keep read from the ledger (one query)."""
    rows = team_month_energy_stored(month=month, team_ids=[team.pk])
    if not rows:
        return None
    [row] = rows
    return replace(row, measured_gpu_hours=measured_gpu_hours_of_team(month=month, team_id=team.pk))


def team_energy_cached(*, team: Team, month: date) -> TeamEnergy | None:
    """team_energy once per data version and energy import: it reads every run of the team's
    month (the team page read it again on every view)."""
    return panel_cached(
        "team_energy",
        key=lambda: (team.pk, month, JobEnergy.objects.aggregate(newest=Max("pk"))["newest"]),
        compute=lambda: team_energy(team=team, month=month),
    )


def endpoint_month_energy(
    *, month: date, endpoint: str, totals: list[EndpointMonth], teams: QuerySet[Team], finance: bool
) -> EndpointEnergy | None:
    """The endpoint's energy for the teams the page shows; usage per team once (a team's
    usage is counted in full in each of its currency rows)."""
    usage: dict[int | None, tuple[int, int]] = {}
    for row in totals:
        usage.setdefault(row.team.pk if row.team else None, (row.requests, row.tokens))
    return endpoint_energy(
        month=month,
        endpoint=endpoint,
        team_ids=teams.values_list("pk", flat=True),
        include_unowned=finance,
        usage=usage,
    )


@dataclass(frozen=True, slots=True)
class EnergyCard:
    """The overview's energy and carbon of the month's runs, summed over the teams shown."""

    runs: int
    gpu_kwh: Decimal
    measured_kwh: Decimal
    facility_kwh: Decimal
    # None: no run had a grid intensity; co2e_missing_kwh: facility kWh left out of it.
    co2e_kg: Decimal | None
    co2e_missing_kwh: Decimal
    estimated: bool
    grid_year: str

    @property
    def measured_share(self) -> Decimal | None:
        return self.measured_kwh / self.gpu_kwh if self.gpu_kwh else None


def energy_card(*, month: date, teams: QuerySet[Team], include_unowned: bool) -> EnergyCard | None:
    """Energy of the month's runs of the teams (and of no team, for finance); None when none.
    From the per-team sums the run-economics step stored (finops.economics), else (a month
    not stored yet) from the stored run rows: the same figures as energy_card_read_time."""
    rows = team_month_energy_summed(month=month, team_ids=_ids(teams, include_unowned))
    if rows is None:
        return energy_card_of_runs(month=month, teams=teams, include_unowned=include_unowned)
    return _card(rows)


def energy_card_of_runs(
    *, month: date, teams: QuerySet[Team], include_unowned: bool
) -> EnergyCard | None:
    """energy_card from the stored run rows (finops.economics.RunEconomics: every run row of
    the month, ~0.5 s at demo scale), for a month whose per-team sums are not stored."""
    return _card(team_month_energy_stored(month=month, team_ids=_ids(teams, include_unowned)))


def energy_card_read_time(
    *, month: date, teams: QuerySet[Team], include_unowned: bool
) -> EnergyCard | None:
    """energy_card from the ledger, jobs and energy at read time (seconds at demo scale): the
    reference the rollup is tested against."""
    return _card(team_month_energy(month=month, team_ids=_ids(teams, include_unowned)))


def _ids(teams: QuerySet[Team], include_unowned: bool) -> list[int | None]:
    ids: list[int | None] = list(teams.values_list("pk", flat=True))
    if include_unowned:
        ids.append(None)
    return ids


def _card(rows: list[TeamEnergy]) -> EnergyCard | None:
    if not rows:
        return None
    co2 = [r.co2e_kg for r in rows if r.co2e_kg is not None]
    years = {r.grid_year for r in rows if r.grid_year}
    return EnergyCard(
        runs=sum(r.runs for r in rows),
        gpu_kwh=sum((r.gpu_kwh for r in rows), Decimal(0)),
        measured_kwh=sum((r.measured_kwh for r in rows), Decimal(0)),
        facility_kwh=sum((r.facility_kwh for r in rows), Decimal(0)),
        co2e_kg=sum(co2, Decimal(0)) if co2 else None,
        co2e_missing_kwh=sum((r.co2e_missing_kwh for r in rows), Decimal(0)),
        estimated=any(r.estimated for r in rows),
        grid_year=", ".join(sorted(years)),
    )


def energy_card_cached(
    *, month: date, teams: QuerySet[Team], include_unowned: bool
) -> EnergyCard | None:
    """energy_card once per data version and energy import (it reads every run of the month:
    seconds at demo scale; finops.web.page_cache)."""
    return panel_cached(
        "energy_card",
        key=lambda: (
            month,
            sorted(teams.values_list("pk", flat=True)),
            include_unowned,
            JobEnergy.objects.aggregate(newest=Max("pk"))["newest"],
        ),
        compute=lambda: energy_card(month=month, teams=teams, include_unowned=include_unowned),
    )
