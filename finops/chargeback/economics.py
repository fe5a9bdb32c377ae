"""What a team's runs bought, wasted and burned in a month: one read for statements, the
overview and anything else that shows these figures beside cost (issues 30, 31, 32).

`teams_month_economics(month, team_ids)` is the one selector; it is built on the read-time
selectors of run economics (finops.run_metrics), waste (finops.waste) and energy
(finops.energy), in bulk: a fixed number of queries per 500 runs, whatever the number of teams.
What the runs bought, the waste and the energy are read from the stored rollup
(finops.economics); the `_read_time` twin computes them from the run metrics, the jobs and the
ledger (the reference of the tests).

What each part counts (each follows its own selector's definition):
- bought: the team's training runs that ENDED in the month (their last month of cost), whole-run
  figures (every attempt and month): useful tokens, the amortised cost of the runs that have
  metrics, $/1M tokens = that cost / tokens x 10^6, GPU-hour weighted MFU; runs without metrics
  counted apart (their cost bought nothing the ledger can measure);
- wasted: the parts of the month's cost of the team's runs by cause (rework, restart,
  abandoned, idle in allocation; cancelled apart), `estimated_causes` naming the estimates;
- burned: GPU and facility kWh and kg CO2e of the month's runs, with the measured share, and
  the PUE and grid intensity (source, year) when every run used the same ones.

The result is a plain dataclass that round-trips through JSON (`as_json` / `from_json`), so a
closed statement keeps the figures it was frozen with.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, TypeVar

from django.db.models import Max

from finops.attribution.models import Category, RunCost
from finops.core.months import month_format
from finops.economics.energy_selectors import team_month_energy_summed
from finops.economics.selectors import team_month_energy_stored, teams_bought_stored
from finops.economics.waste_selectors import team_months_waste_summed
from finops.energy.selectors import TeamEnergy, team_month_energy
from finops.org.models import Team
from finops.run_metrics.selectors import RunKey, run_efficiencies
from finops.run_metrics.team_efficiency import TeamMonthEfficiency
from finops.waste.causes import CAUSES
from finops.waste.selectors import TeamWaste, team_months_waste

ZERO = Decimal(0)
SHARE = Decimal("0.0001")
CAUSE_LABELS = {
    "rework": "Rework (work lost after the last checkpoint)",
    "restart": "Restart (start-up of a resumed attempt)",
    "abandoned": "Abandoned (interrupted, never resumed)",
    "cancelled": "Cancelled (apart: may be a decision)",
    "idle_in_allocation": "Idle in allocation (GPUs held, not used)",
}


@dataclass(slots=True)
class CurrencyEconomics:
    """Bought and wasted, in one billing currency of the team's runs."""

    currency: str
    runs_with_metrics: int = 0
    runs_without_metrics: int = 0
    useful_tokens: int = 0
    # Amortised cost (EffectiveCost) of the runs with metrics, whole runs.
    measured_cost: Decimal = ZERO
    gpu_hours: Decimal = ZERO
    cost_per_million_tokens: Decimal | None = None
    mfu: Decimal | None = None
    # The month's amortised cost of the runs the waste is read from, and its parts.
    waste_runs: int = 0
    runs_cost: Decimal = ZERO
    rework: Decimal = ZERO
    restart: Decimal = ZERO
    abandoned: Decimal = ZERO
    idle_in_allocation: Decimal = ZERO
    cancelled: Decimal = ZERO
    estimated_causes: list[str] = field(default_factory=list)

    @property
    def waste_total(self) -> Decimal:
        """rework + restart + abandoned + idle in allocation (cancelled is apart)."""
        return self.rework + self.restart + self.abandoned + self.idle_in_allocation

    @property
    def waste_estimated(self) -> bool:
        return bool(self.estimated_causes)

    @property
    def waste_parts(self) -> list[tuple[str, str, Decimal, bool]]:
        """(cause, label, amount, estimated) in the order statements list them."""
        return [(c, CAUSE_LABELS[c], getattr(self, c), c in self.estimated_causes) for c in CAUSES]


@dataclass(slots=True)
class EnergyEconomics:
    runs: int = 0
    gpu_kwh: Decimal = ZERO
    measured_kwh: Decimal = ZERO
    estimated_kwh: Decimal = ZERO
    facility_kwh: Decimal = ZERO
    # None: no run had a grid intensity; co2e_missing_kwh: the facility kWh left out.
    co2e_kg: Decimal | None = None
    co2e_missing_kwh: Decimal = ZERO
    # Shown when every run used the same (else None / "": the runs' pages show theirs).
    pue: Decimal | None = None
    pue_source: str = ""
    grid_g_per_kwh: Decimal | None = None
    grid_source: str = ""
    grid_year: str = ""
    power_source: str = ""
    estimated: bool = False

    @property
    def measured_share(self) -> Decimal | None:
        """Measured GPU kWh / GPU kWh, to 4 places (None without energy)."""
        if not self.gpu_kwh:
            return None
        return (self.measured_kwh / self.gpu_kwh).quantize(SHARE, rounding=ROUND_HALF_EVEN)


@dataclass(slots=True)
class TeamMonthEconomics:
    team_slug: str
    month: date
    currencies: list[CurrencyEconomics] = field(default_factory=list)
    energy: EnergyEconomics | None = None

    @property
    def is_empty(self) -> bool:
        return not self.currencies and self.energy is None

    def as_json(self) -> dict[str, Any]:
        return {
            "team": self.team_slug,
            "month": month_format(self.month),
            "currencies": [_dump(c) for c in self.currencies],
            "energy": _dump(self.energy) if self.energy is not None else None,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any], *, month: date) -> TeamMonthEconomics:
        energy = body.get("energy")
        return cls(
            team_slug=str(body.get("team", "")),
            month=month,
            currencies=[_load(CurrencyEconomics, c) for c in body.get("currencies", [])],
            energy=_load(EnergyEconomics, energy) if energy is not None else None,
        )


_T = TypeVar("_T", CurrencyEconomics, EnergyEconomics)


def _dump(obj: CurrencyEconomics | EnergyEconomics) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        out[f.name] = f"{value:f}" if isinstance(value, Decimal) else value
    return out


def _load(kind: type[_T], body: dict[str, Any]) -> _T:
    values: dict[str, Any] = {}
    for f in fields(kind):
        if f.name not in body:
            continue
        value = body[f.name]
        if isinstance(value, str) and "Decimal" in str(f.type):
            value = Decimal(value)
        values[f.name] = value
    return kind(**values)


# --- the reads --------------------------------------------------------------------------


def _bought(*, month: date, teams: dict[int, Team]) -> dict[tuple[int, str], TeamMonthEfficiency]:
    """Per (team, currency): the training runs that ended in the month, their efficiency, at
    read time (the reference of finops.economics.selectors.teams_bought_stored)."""
    ran = RunCost.objects.filter(
        billing_period=month, team_id__in=list(teams), category=Category.TRAINING
    )
    ends = (
        RunCost.objects.filter(
            team_id__in=list(teams),
            category=Category.TRAINING,
            run_id__in=ran.values("run_id"),
        )
        .order_by()
        .values("team_id", "run_id", "billing_currency")
        .annotate(last=Max("billing_period"))
    )
    keys = [
        RunKey(row["team_id"], teams[row["team_id"]].slug, row["run_id"], row["billing_currency"])
        for row in ends
        if row["last"] == month
    ]
    rows: dict[tuple[int, str], TeamMonthEfficiency] = {}
    # By run id, as the stored rollup's reader adds them: the GPU-hours are inexact quotients
    # (seconds / 3600), whose sum's last digit depends on the order.
    found = run_efficiencies(keys)
    for key in sorted(found, key=lambda k: (k.team_id or 0, k.run_id, k.currency)):
        efficiency = found[key]
        assert key.team_id is not None
        slot = (key.team_id, key.currency)
        row = rows.setdefault(slot, TeamMonthEfficiency(month=month, currency=key.currency))
        if efficiency is None:
            row.runs_without_metrics += 1
        else:
            row.add(key.run_id, efficiency)
    return {slot: row.finish() for slot, row in rows.items()}


def _energy(rows: list[TeamEnergy]) -> dict[str, EnergyEconomics]:
    found: dict[str, EnergyEconomics] = {}
    for row in rows:
        found[row.team] = EnergyEconomics(
            runs=row.runs,
            gpu_kwh=row.gpu_kwh,
            measured_kwh=row.measured_kwh,
            estimated_kwh=row.estimated_kwh,
            facility_kwh=row.facility_kwh,
            co2e_kg=row.co2e_kg,
            co2e_missing_kwh=row.co2e_missing_kwh,
            pue=row.pue,
            pue_source=row.pue_source,
            grid_g_per_kwh=row.grid_g_per_kwh,
            grid_source=row.grid_source,
            grid_year=row.grid_year,
            power_source=row.power_source,
            estimated=row.estimated,
        )
    return found


def _energy_stored(*, month: date, team_ids: list[int]) -> list[TeamEnergy]:
    """The teams' energy from the stored per-team sums (TeamEnergyRow), or from the stored run
    rows for a month rolled up before those sums existed."""
    summed = team_month_energy_summed(month=month, team_ids=team_ids)
    if summed is None:
        return team_month_energy_stored(month=month, team_ids=team_ids)
    return summed


def teams_month_economics(*, month: date, team_ids: list[int]) -> dict[int, TeamMonthEconomics]:
    """What each team's runs bought, wasted and burned in the month (teams without runs are
    left out), read from the stored rollup (finops.economics): a fixed number of queries. What
    the runs bought was read at read time until issue 29 (0.3 s of a statement at demo scale);
    the waste and the energy are the stored per-team sums the overview reads (TeamWasteRow,
    TeamEnergyRow: built from the same run rows, the same figures), not every run row of the
    team's month (issue 29, h-pages: 45 + 11 -> 7 + 3 ms of the language team's statement)."""
    return _teams_month_economics(
        month, team_ids, teams_bought_stored, team_months_waste_summed, _energy_stored
    )


def teams_month_economics_read_time(
    *, month: date, team_ids: list[int]
) -> dict[int, TeamMonthEconomics]:
    """teams_month_economics with what the runs bought, the waste and the energy computed at
    read time from the run metrics, the jobs and the ledger (seconds at demo scale): the
    reference the rollup is tested against."""
    return _teams_month_economics(month, team_ids, _bought, team_months_waste, team_month_energy)


_BoughtReader = Callable[..., dict[tuple[int, str], TeamMonthEfficiency]]
_WasteReader = Callable[..., dict[date, list[TeamWaste]]]
_EnergyReader = Callable[..., list[TeamEnergy]]


def _teams_month_economics(
    month: date,
    team_ids: list[int],
    bought_reader: _BoughtReader,
    waste_reader: _WasteReader,
    energy_reader: _EnergyReader,
) -> dict[int, TeamMonthEconomics]:
    month = month.replace(day=1)
    teams = Team.objects.in_bulk(team_ids)
    if not teams:
        return {}
    slots: dict[tuple[int, str], CurrencyEconomics] = {}

    def slot(team_id: int, currency: str) -> CurrencyEconomics:
        return slots.setdefault((team_id, currency), CurrencyEconomics(currency=currency))

    for (team_id, currency), bought in bought_reader(month=month, teams=teams).items():
        row = slot(team_id, currency)
        row.runs_with_metrics = bought.runs_with_metrics
        row.runs_without_metrics = bought.runs_without_metrics
        row.useful_tokens = bought.useful_tokens
        row.measured_cost = bought.cost
        row.gpu_hours = bought.gpu_hours
        row.cost_per_million_tokens = bought.cost_per_million_tokens
        row.mfu = bought.mfu
    wasted = waste_reader(
        months=[month], teams=Team.objects.filter(pk__in=list(teams)), include_unowned=False
    )[month]
    for waste in wasted:
        if waste.team is None:
            continue
        row = slot(waste.team.pk, waste.currency)
        row.waste_runs, row.runs_cost = waste.runs, waste.cost
        for cause in CAUSES:
            setattr(row, cause, getattr(waste.parts, cause))
        row.estimated_causes = sorted(waste.parts.estimated_causes)
    energy = _energy(energy_reader(month=month, team_ids=list(teams)))
    by_team: dict[int, list[CurrencyEconomics]] = defaultdict(list)
    for (team_id, _currency), row in sorted(slots.items()):
        by_team[team_id].append(row)
    result = {}
    for team_id, team in teams.items():
        found = TeamMonthEconomics(
            team.slug, month, by_team.get(team_id, []), energy.get(team.slug)
        )
        if not found.is_empty:
            result[team_id] = found
    return result


def team_month_economics(*, team: Team, month: date) -> TeamMonthEconomics:
    """teams_month_economics of one team (empty when its runs did nothing that month)."""
    found = teams_month_economics(month=month, team_ids=[team.pk]).get(team.pk)
    return found or TeamMonthEconomics(team.slug, month.replace(day=1))
