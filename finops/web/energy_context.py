"""Energy and emissions shown on the run and team pages (finops/energy/selectors.py)."""

from __future__ import annotations

from datetime import date

from finops.energy.selectors import RunEnergy, TeamEnergy, run_energy, team_month_energy
from finops.org.models import Team
from finops.run_metrics.selectors import RunKey


def run_month_energy(*, team: Team, run_id: str, month: date) -> RunEnergy | None:
    """The run's energy over the month the page shows."""
    return run_energy(RunKey(team.pk, team.slug, run_id, ""), [month])


def team_energy(*, team: Team, month: date) -> TeamEnergy | None:
    rows = team_month_energy(month=month, team_ids=[team.pk])
    return rows[0] if rows else None
