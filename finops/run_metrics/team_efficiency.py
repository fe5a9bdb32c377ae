"""What a team's training runs bought, month by month (issue 30): the team page's trend and
`GET /api/v1/teams/{slug}/efficiency/`.

A run counts in the month it last had cost (the month it ended, as the ledger saw it), with its
whole-run figures (every month and attempt: selectors.run_efficiency), so a run that spans two
months is counted once. Per month and currency, over the runs that have metrics:
- useful tokens and their cost: the sums; $/1M tokens = cost / tokens x 10^6;
- MFU: the GPU-hour weighted mean of the runs' MFU (runs without one left out);
- the best and worst run by $/1M tokens (runs whose GPU-hours carry no amortised cost, e.g.
  covered by a commitment whose fee is billed apart, are not ranked).
Runs without metrics are counted apart (`runs_without_metrics`): their cost bought nothing the
ledger can measure.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.db.models import Max

from finops.attribution.models import Category, RunCost
from finops.core.money import EXACT
from finops.org.models import Team
from finops.run_metrics.selectors import RunEfficiency, RunKey, run_efficiencies

MONEY = Decimal("0.000000000001")
RATIO = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class RunFigure:
    run_id: str
    cost_per_million_tokens: Decimal
    mfu: Decimal | None


@dataclass(slots=True)
class TeamMonthEfficiency:
    month: date
    currency: str
    runs_with_metrics: int = 0
    runs_without_metrics: int = 0
    useful_tokens: int = 0
    cost: Decimal = Decimal(0)
    gpu_hours: Decimal = Decimal(0)
    cost_per_million_tokens: Decimal | None = None
    mfu: Decimal | None = None
    best: RunFigure | None = None
    worst: RunFigure | None = None
    _mfu_hours: Decimal = Decimal(0)
    _mfu_weighted: Decimal = Decimal(0)
    _figures: list[RunFigure] = field(default_factory=list)

    def add(self, run_id: str, e: RunEfficiency) -> None:
        if e.cost is None or not e.useful_tokens:
            self.runs_without_metrics += 1
            return
        self.runs_with_metrics += 1
        self.useful_tokens += e.useful_tokens
        self.cost += e.cost
        self.gpu_hours += e.gpu_hours
        if e.mfu is not None:
            self._mfu_hours += e.gpu_hours
            self._mfu_weighted += e.mfu * e.gpu_hours
        if e.cost_per_million_tokens is not None:
            self._figures.append(RunFigure(run_id, e.cost_per_million_tokens, e.mfu))

    def finish(self) -> TeamMonthEfficiency:
        if self.useful_tokens:
            per = EXACT.divide(self.cost * 10**6, Decimal(self.useful_tokens))
            self.cost_per_million_tokens = per.quantize(MONEY, context=EXACT)
        if self._mfu_hours:
            self.mfu = EXACT.divide(self._mfu_weighted, self._mfu_hours).quantize(RATIO)
        # A run whose GPU-hours carry no amortised cost (hours covered by a commitment whose fee
        # the bill keeps on fee lines, not on the nodes: GCP's CUD) is not the best run at
        # 0.00 per 1M tokens: its cost is elsewhere. It still counts in the month's sums.
        ranked = sorted(
            (f for f in self._figures if f.cost_per_million_tokens > 0),
            key=lambda f: (f.cost_per_million_tokens, f.run_id),
        )
        self.best = ranked[0] if ranked else None
        self.worst = ranked[-1] if len(ranked) > 1 else None
        return self


def team_efficiency_by_month(*, team: Team, months: list[date]) -> list[TeamMonthEfficiency]:
    """One row per month (of `months`) and currency in which the team's training runs ended,
    computed at read time (finops.economics reads the same from its stored rollup)."""
    wanted = set(months)
    ends = (
        RunCost.objects.filter(team=team, category=Category.TRAINING)
        .order_by()
        .values("run_id", "billing_currency")
        .annotate(last=Max("billing_period"))
    )
    keys: dict[RunKey, date] = {
        RunKey(team.pk, team.slug, row["run_id"], row["billing_currency"]): row["last"]
        for row in ends
        if row["last"] in wanted
    }
    return team_efficiency_rows(keys, run_efficiencies(keys))


def team_efficiency_rows(
    ends: dict[RunKey, date], efficiencies: dict[RunKey, RunEfficiency | None]
) -> list[TeamMonthEfficiency]:
    """The trend's rows from each run's last month (`ends`) and whole-run efficiency (None: no
    metrics): pure, shared by the read-time and the stored rollup's trend."""
    rows: dict[tuple[date, str], TeamMonthEfficiency] = {}
    without: dict[tuple[date, str], int] = defaultdict(int)
    for key in sorted(ends, key=lambda k: (k.run_id, k.currency)):
        e = efficiencies.get(key)
        slot = (ends[key], key.currency)
        if e is None:
            without[slot] += 1
            continue
        rows.setdefault(slot, TeamMonthEfficiency(month=slot[0], currency=slot[1])).add(
            key.run_id, e
        )
    for slot, count in without.items():
        row = rows.setdefault(slot, TeamMonthEfficiency(month=slot[0], currency=slot[1]))
        row.runs_without_metrics += count
    return [rows[slot].finish() for slot in sorted(rows)]
