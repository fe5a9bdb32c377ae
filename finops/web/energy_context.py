"""Energy and emissions shown on the run and team pages (finops/energy/selectors.py)."""

from __future__ import annotations

from datetime import date

from django.db.models import Max, QuerySet

from finops.energy.endpoint_selectors import EndpointEnergy, endpoint_energy
from finops.energy.models import JobEnergy
from finops.energy.selectors import RunEnergy, TeamEnergy, run_energy, team_month_energy
from finops.inference.selectors import EndpointMonth
from finops.org.models import Team
from finops.run_metrics.selectors import RunKey
from finops.web.page_cache import panel_cached


def run_month_energy(*, team: Team, run_id: str, month: date) -> RunEnergy | None:
    """The run's energy over the month the page shows."""
    return run_energy(RunKey(team.pk, team.slug, run_id, ""), [month])


def team_energy(*, team: Team, month: date) -> TeamEnergy | None:
    """The team's month of energy, computed once per data version and energy import (every
    run of the month, seconds at demo scale: finops.web.page_cache)."""

    def compute() -> TeamEnergy | None:
        rows = team_month_energy(month=month, team_ids=[team.pk])
        return rows[0] if rows else None

    # DCGM energy imports replace their rows: the newest row's id follows them.
    return panel_cached(
        "team_energy",
        key=lambda: (month, team.pk, JobEnergy.objects.aggregate(newest=Max("pk"))["newest"]),
        compute=compute,
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
