"""Reads of the stored waste per team and currency of a month (finops.economics.models
.TeamWasteRow): the rows as finops.waste.selectors.TeamWaste, the objects
team_months_waste_stored sums from the run rows, so the overview's waste card shows the same
figures either way (tests/economics/test_team_waste_stored.py)."""

from __future__ import annotations

import datetime as dt

from django.db.models import QuerySet

from finops.attribution.selectors.reporting import visible_to
from finops.economics.models import TeamWasteMonth, TeamWasteRow
from finops.economics.selectors import team_months_waste_stored
from finops.org.models import Team
from finops.waste.causes import CAUSES, WasteParts
from finops.waste.selectors import TeamWaste


def team_months_waste_summed(
    *, months: list[dt.date], teams: QuerySet[Team], include_unowned: bool
) -> dict[dt.date, list[TeamWaste]]:
    """team_months_waste_stored(months, teams, include_unowned) from the stored per-team sums:
    two queries (the stored months, their rows of the teams), whatever the number of runs. A
    month not stored (rolled up before the store existed) is summed from its run rows."""
    stored = set(
        TeamWasteMonth.objects.filter(billing_period__in=months).values_list(
            "billing_period", flat=True
        )
    )
    result: dict[dt.date, list[TeamWaste]] = {month: [] for month in months}
    if stored:
        rows = visible_to(
            TeamWasteRow.objects.filter(month__billing_period__in=sorted(stored)),
            teams=teams,
            include_unowned=include_unowned,
        ).select_related("team", "month")
        for row in rows:
            parts = WasteParts(**{cause: getattr(row, cause) for cause in CAUSES})
            parts.estimated_causes = {c for c in row.estimated_causes.split(",") if c}
            result[row.month.billing_period].append(
                TeamWaste(row.team, row.currency, row.cost, row.runs, parts)
            )
    missing = [month for month in months if month not in stored]
    if missing:
        result.update(
            team_months_waste_stored(months=missing, teams=teams, include_unowned=include_unowned)
        )
    for month_rows in result.values():
        month_rows.sort(key=lambda r: (r.team is None, r.team.slug if r.team else "", r.currency))
    return result
