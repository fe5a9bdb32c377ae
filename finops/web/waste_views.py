"""What the pages show of waste by cause (issue 31): the run page's attempt timeline and waste,
and the waste card of the team and overview pages (by cause, with the months before).

The timeline is an inline SVG (no style attributes: the CSP forbids them); positions are in
0..1000 units of the run's span from its first start to its last end.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from django.db.models import QuerySet

from finops.attribution.models import RunCost
from finops.core.months import month_add
from finops.economics.advice_selectors import checkpoint_advice_stored
from finops.economics.waste_selectors import team_months_waste_summed
from finops.org.models import Team
from finops.run_metrics.selectors import RunKey
from finops.waste.advice import CheckpointAdvice, checkpoint_advice, checkpoint_write_minutes
from finops.waste.causes import WasteParts
from finops.waste.selectors import (
    AttemptWaste,
    RunWaste,
    TeamWaste,
    run_waste,
    run_wastes,
    team_months_waste,
    waste_settings,
)
from finops.web.page_cache import panel_cached

WIDTH = 1000
TREND_MONTHS = 3


@dataclass(frozen=True, slots=True)
class Bar:
    row: AttemptWaste
    y: int
    x: int
    width: int
    restart_width: int
    rework_x: int
    rework_width: int
    ticks: list[int]
    label: str


@dataclass(slots=True)
class RunWastePanel:
    waste: RunWaste
    bars: list[Bar]
    height: int
    span_start: dt.datetime | None
    span_end: dt.datetime | None


def _x(when: dt.datetime, start: dt.datetime, seconds: Fraction) -> int:
    offset = Fraction(int((when - start).total_seconds()))
    return round(offset / seconds * WIDTH) if seconds else 0


def _panel(waste: RunWaste) -> RunWastePanel:
    timed = [r for r in waste.attempts if r.attempt.start is not None]
    if not timed:
        return RunWastePanel(waste, [], 0, None, None)
    start = min(r.attempt.start for r in timed if r.attempt.start)
    now = dt.datetime.now(dt.UTC)
    end = max((r.attempt.end or now) for r in timed)
    seconds = Fraction(max(int((end - start).total_seconds()), 1))
    bars = []
    for index, row in enumerate(timed):
        a = row.attempt
        assert a.start is not None
        x = _x(a.start, start, seconds)
        width = max(_x(a.end or now, start, seconds) - x, 2)
        restart = round(row.shares.shares["restart"] * width)
        rework = round(row.shares.shares["rework"] * width)
        label = f"{a.job_id}" + (f" (attempt {a.attempt})" if a.attempt > 1 else "")
        bars.append(
            Bar(
                row=row,
                y=index * 30 + 4,
                x=x,
                width=width,
                restart_width=restart,
                rework_x=x + width - rework,
                rework_width=rework,
                ticks=[_x(t, start, seconds) for t in row.shares.checkpoints],
                label=label,
            )
        )
    return RunWastePanel(waste, bars, len(bars) * 30 + 8, start, end)


def run_waste_panels(*, team: Team, run_id: str, month: dt.date) -> list[RunWastePanel]:
    """One panel per currency the run has cost in this month (its waste over every month)."""
    currencies = sorted(
        set(
            RunCost.objects.filter(team=team, run_id=run_id, billing_period=month).values_list(
                "billing_currency", flat=True
            )
        )
    )
    return [_panel(run_waste(RunKey(team.pk, team.slug, run_id, c))) for c in currencies]


@dataclass(slots=True)
class WasteTrend:
    month: dt.date
    # None: no run had cost in this currency that month (no runs is not "0.00 wasted").
    total: Decimal | None


@dataclass(slots=True)
class WasteCardRow:
    """One currency of the card: this month's parts, and the total of the months before."""

    currency: str
    cost: Decimal
    parts: WasteParts
    trend: list[WasteTrend] = field(default_factory=list)
    teams: list[TeamWaste] = field(default_factory=list)

    @property
    def share(self) -> Decimal | None:
        return self.parts.total / self.cost if self.cost > 0 else None


def _card(by_month: dict[dt.date, list[TeamWaste]], month: dt.date) -> list[WasteCardRow]:
    rows: dict[str, WasteCardRow] = {}
    for team_row in by_month[month]:
        row = rows.setdefault(
            team_row.currency, WasteCardRow(team_row.currency, Decimal(0), WasteParts())
        )
        row.cost += team_row.cost
        row.parts.add(team_row.parts)
        row.teams.append(team_row)
    for before in _earlier(month):
        totals: dict[str, Decimal] = {}
        for team_row in by_month[before]:
            totals[team_row.currency] = (
                totals.get(team_row.currency, Decimal(0)) + team_row.parts.total
            )
        for currency, row in rows.items():
            row.trend.append(WasteTrend(before, totals.get(currency)))
    return sorted(rows.values(), key=lambda r: r.currency)


def _earlier(month: dt.date) -> list[dt.date]:
    return [month_add(month, -back) for back in range(TREND_MONTHS, 0, -1)]


def waste_card(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[WasteCardRow]:
    """The waste of the teams' runs this month by cause, per currency, with each team's row
    and the totals of the TREND_MONTHS months before: from the stored rollup
    (finops.economics: the per-team sums the run-economics step stores, else the run rows),
    the same figures as waste_card_read_time. A few queries."""
    by_month = team_months_waste_summed(
        months=[*_earlier(month), month], teams=teams, include_unowned=include_unowned
    )
    return _card(by_month, month)


def waste_card_read_time(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[WasteCardRow]:
    """waste_card computed from the jobs and the ledger at read time (every attempt of every
    run of four months: seconds at demo scale); the reference the rollup is tested against."""
    by_month = team_months_waste(
        months=[*_earlier(month), month], teams=teams, include_unowned=include_unowned
    )
    return _card(by_month, month)


def waste_card_cached(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[WasteCardRow]:
    """waste_card, computed once per data version and waste settings (finops.web.page_cache):
    it sums every run of four months, seconds at demo scale."""
    return panel_cached(
        "waste_card",
        key=lambda: (
            month,
            sorted(teams.values_list("pk", flat=True)),
            include_unowned,
            waste_settings(),
        ),
        compute=lambda: waste_card(month=month, teams=teams, include_unowned=include_unowned),
    )


def checkpoint_advice_cached(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[CheckpointAdvice]:
    """checkpoint_advice as the pipeline stored it (finops.economics: the run-economics step),
    else computed once per data version and waste settings (a month not stored yet, or stored
    with other settings)."""
    stored = checkpoint_advice_stored(month=month, teams=teams, include_unowned=include_unowned)
    if stored is not None:
        return stored
    return panel_cached(
        "checkpoint_advice",
        key=lambda: (
            month,
            sorted(teams.values_list("pk", flat=True)),
            include_unowned,
            waste_settings(),
            checkpoint_write_minutes(),
        ),
        compute=lambda: checkpoint_advice(
            month=month, teams=teams, include_unowned=include_unowned
        ),
    )


def runs_with_waste(runs: list[RunCost], *, month: dt.date) -> list[RunCost]:
    """The rollups of a page of runs, each with `waste` (its WasteParts in this month) set: the
    runs browser's and the team page's waste column. A few queries for the page."""
    keys = {
        run.pk: RunKey(run.team_id, run.team.slug if run.team else "", run.run_id,
                       run.billing_currency)
        for run in runs
    }  # fmt: skip
    wastes = run_wastes(list(set(keys.values())), month=month)
    for run in runs:
        # A run on several clusters has a rollup per cluster: each shows its own attempts'.
        parts = WasteParts()
        for row in wastes[keys[run.pk]].attempts:
            if row.attempt.cluster == run.cluster:
                parts.add(row.parts)
        run.waste = parts  # type: ignore[attr-defined]
    return runs
