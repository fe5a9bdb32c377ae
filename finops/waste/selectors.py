"""Waste by cause of runs, teams and months (DESIGN section 9), read from the ledger, the jobs
and the run metrics; estimates from the pricing assumptions where a run has no metrics.

- run_waste: one run over every month it has cost in, with its attempts (the run page's
  timeline and the `waste` object of `GET /api/v1/runs/{id}/`);
- team_month_waste: the parts summed per team (and currency) over the runs of a month, each
  attempt's parts taken from its cost in that month.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import QuerySet

from finops.attribution.models import RunCost
from finops.attribution.selectors.reporting import visible_to
from finops.org.models import Team
from finops.pricing.models import PricingAssumptions
from finops.run_metrics.selectors import RunKey
from finops.waste.attempts import Attempt, run_attempts, run_metrics
from finops.waste.causes import (
    AttemptShares,
    Metrics,
    Settings,
    WasteParts,
    attempt_shares,
    parts_of,
)


@dataclass(slots=True)
class AttemptWaste:
    attempt: Attempt
    shares: AttemptShares
    parts: WasteParts


@dataclass(slots=True)
class RunWaste:
    key: RunKey
    # The run's ledger cost over its attempts and months, in key.currency.
    cost: Decimal
    parts: WasteParts
    attempts: list[AttemptWaste]
    has_metrics: bool
    settings: Settings


@dataclass(slots=True)
class TeamWaste:
    team: Team | None
    currency: str
    cost: Decimal
    runs: int
    parts: WasteParts = field(default_factory=WasteParts)


def waste_settings() -> Settings:
    """The checkpoint interval and restart minutes of the pricing assumptions (a stored value
    that fails validation is replaced by its default, as the pricing pages do)."""
    # Read, never created here (a page view writes nothing): the defaults when there is no row.
    row = PricingAssumptions.objects.filter(pk=1).first() or PricingAssumptions()
    row.usable()
    return Settings(
        checkpoint_interval_minutes=row.checkpoint_interval_minutes,
        restart_minutes=row.restart_minutes,
    )


def run_waste_of(
    key: RunKey,
    attempts: list[Attempt],
    metrics: Metrics | None,
    settings: Settings,
    month: dt.date | None = None,
) -> RunWaste:
    # A month's parts need the shares of its attempts only (judged against all of them).
    only = None if month is None else {a.pk for a in attempts if month in a.cost_by_month}
    shares = attempt_shares(
        (a.times() for a in attempts), metrics=metrics, settings=settings, only=only
    )
    by_pk = {s.pk: s for s in shares}
    total = WasteParts()
    rows: list[AttemptWaste] = []
    cost = Decimal(0)
    for attempt in attempts:
        attempt_cost = attempt.cost if month is None else attempt.cost_by_month.get(month)
        if attempt_cost is None:
            continue
        parts = parts_of(by_pk[attempt.pk], attempt_cost)
        total.add(parts)
        cost += attempt_cost
        rows.append(AttemptWaste(attempt, by_pk[attempt.pk], parts))
    return RunWaste(key, cost, total, rows, metrics is not None, settings)


def run_waste(key: RunKey) -> RunWaste:
    """The run's waste by cause over every month it has cost in, with its attempts."""
    settings = waste_settings()
    attempts = run_attempts([key])[key]
    metrics = run_metrics([key]).get(key)
    return run_waste_of(key, attempts, metrics, settings)


def run_wastes(keys: list[RunKey], *, month: dt.date | None = None) -> dict[RunKey, RunWaste]:
    """Waste of many runs (the parts of `month` only, when given). A few queries, plus one per
    run that has metrics."""
    if not keys:
        return {}
    settings = waste_settings()
    attempts = run_attempts(keys)
    metrics = run_metrics(keys)
    return {
        key: run_waste_of(key, attempts[key], metrics.get(key), settings, month) for key in keys
    }


def team_month_waste(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[TeamWaste]:
    """Waste by cause per team and currency of the month's runs (training and inference
    rollups alike), teams the caller may see; runs no team owns only when include_unowned."""
    return team_months_waste(months=[month], teams=teams, include_unowned=include_unowned)[month]


def team_months_waste(
    *, months: list[dt.date], teams: QuerySet[Team], include_unowned: bool
) -> dict[dt.date, list[TeamWaste]]:
    """team_month_waste of several months at once (a card and its trend): a fixed number of
    queries whatever the number of months, runs and attempts."""
    rollups = visible_to(
        RunCost.objects.filter(billing_period__in=months),
        teams=teams,
        include_unowned=include_unowned,
    ).select_related("team")
    team_of: dict[int | None, Team | None] = {}
    keys_of: dict[dt.date, set[RunKey]] = {month: set() for month in months}
    for rollup in rollups.order_by():
        slug = rollup.team.slug if rollup.team else ""
        team_of[rollup.team_id] = rollup.team
        keys_of[rollup.billing_period].add(
            RunKey(rollup.team_id, slug, rollup.run_id, rollup.billing_currency)
        )
    every = sorted(set().union(*keys_of.values()), key=lambda k: (k.team_slug, k.run_id))
    settings = waste_settings() if every else None
    attempts = run_attempts(every)
    metrics = run_metrics(every)
    result: dict[dt.date, list[TeamWaste]] = {}
    for month in months:
        rows: dict[tuple[int | None, str], TeamWaste] = {}
        for key in sorted(keys_of[month], key=lambda k: (k.team_slug, k.run_id, k.currency)):
            assert settings is not None
            waste = run_waste_of(key, attempts[key], metrics.get(key), settings, month)
            row = rows.get((key.team_id, key.currency))
            if row is None:
                row = TeamWaste(team_of[key.team_id], key.currency, Decimal(0), 0)
                rows[(key.team_id, key.currency)] = row
            row.cost += waste.cost
            row.runs += 1
            row.parts.add(waste.parts)
        result[month] = sorted(
            rows.values(),
            key=lambda r: (r.team is None, r.team.slug if r.team else "", r.currency),
        )
    return result
