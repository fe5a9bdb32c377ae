"""Reads of the stored per-team energy of a month (finops.economics.models.TeamEnergyRow): the
rows as finops.energy.selectors.TeamEnergy, the objects the read-time team_month_energy gives
(with the measured GPU-hours), so the overview's energy card and the team page show the same
figures either way (tests/economics/test_team_energy_stored.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.db.models import Q

from finops.core.months import month_format
from finops.economics.models import TEAM_ENERGY_FIGURES, TeamEnergyMonth, TeamEnergyRow
from finops.energy.models import JobEnergy
from finops.energy.selectors import TeamEnergy, team_month_energy

_FIGURES = (*TEAM_ENERGY_FIGURES, "measured_gpu_hours")


def team_month_energy_summed(
    *, month: dt.date, team_ids: Iterable[int | None]
) -> list[TeamEnergy] | None:
    """team_month_energy(month, team_ids) from the stored per-team sums, sorted by team slug
    (the unowned runs, slug "", first) as it sorts them; three queries, whatever the number of
    runs. None when the month is not stored (rolled up before the store existed: the caller
    reads the stored run rows). Stale (energy imported after it was stored, its refresh not
    run yet: the run rows are stale too): team_month_energy at read time."""
    header = TeamEnergyMonth.objects.filter(billing_period=month).first()
    if header is None:
        return None
    wanted = set(team_ids)
    newest = JobEnergy.objects.order_by("-pk").values_list("pk", flat=True).first()
    if newest != header.newest_job_energy:
        return team_month_energy(month=month, team_ids=wanted)
    selected = Q(team_id__in=[t for t in wanted if t is not None])
    if None in wanted:
        selected |= Q(team__isnull=True)
    rows = TeamEnergyRow.objects.filter(selected, month=header).select_related("team")
    label = month_format(month)
    found = [
        TeamEnergy(
            team=row.team.slug if row.team else "", month=label,
            **{name: getattr(row, name) for name in _FIGURES},
        )
        for row in rows
    ]  # fmt: skip
    return sorted(found, key=lambda e: e.team)
