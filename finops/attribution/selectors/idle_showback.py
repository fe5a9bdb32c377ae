"""Idle cost as a team lead should see it (issue 29): what the team is charged for idle GPUs under
the idle policies (DESIGN 5.4), and its share of the idle it is not charged for (showback).

Charged (in the team's bill, category `idle`):
- `kept`: idle of node lines the team owns (policy `keep` with the team as the pool's owner, or
  the node line's owner), rows with a node;
- `spread`: idle of `spread` pools put onto the team's jobs pro rata to their cost, rows without
  a node but with a job;
- `commitment`: idle without a node (unused commitment cost the service gave the team).

Shown, not charged (showback): on every node and UTC day where the team's jobs had GPU cost,
the idle of that node-day that another bucket bears (the platform's, no team, or another team
owning the pool) times the team's share of the GPU cost of all jobs on that node-day. It is
what the team's use of those pools leaves idle, as information: it is in nobody's statement
twice, and the team's bill does not change.

Aggregate queries over the month's ledger, whatever the number of rows; amounts are summed
exactly and rounded once. On PostgreSQL two: the idle charged, and the shown idle with the job
cost, summed by the server as bounds of the exact sums (selectors.idle_shown_sql); elsewhere
three: the idle charged, the teams' nodes, and the ledger on those nodes grouped by node-day,
summed here as Decimal bounds (core.bounded_sums). Bounds that round apart are summed again as
Fractions, so the figures are the same on both. Each team's figures are the same whichever
other teams are asked for with it, so the attribution of a month stores every team's
(IdleShowbackMonth, finops.attribution.services) and the pages read theirs
(idle_showback_stored): two queries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.db import connections
from django.db.models import Case, CharField, Q, QuerySet, Value, When

from finops.attribution.inputs.orm_rows import ALL, values_rows
from finops.attribution.models import AllocatedCost, Category, IdleShowbackMonth, IdleShowbackRow
from finops.attribution.selectors.idle_shown_sql import shown_bounds
from finops.attribution.selectors.reporting import currency_order
from finops.core.bounded_sums import QuotientSum
from finops.core.money import EXACT, MoneySum
from finops.currency.selectors import money_round
from finops.org.models import Team

ZERO = Decimal(0)
JOB_CATEGORIES = (Category.TRAINING, Category.INFERENCE)
KEPT, SPREAD, COMMITMENT = "kept", "spread", "commitment"
# The figures of an IdleShowback, as IdleShowbackRow stores them.
FIGURES = ("kept", "spread", "commitment", "shown_platform", "shown_other_teams", "job_cost",
           "nodes")  # fmt: skip


@dataclass(slots=True)
class IdleShowback:
    """One team's idle in one currency for a month."""

    team: Team
    currency: str
    # Charged, by how the idle policy put it on the team's bill.
    kept: Decimal = ZERO
    spread: Decimal = ZERO
    commitment: Decimal = ZERO
    # Shown, not charged: the team's share of idle others bear on the nodes its jobs ran on,
    # split by who bears it (the platform bucket: no team; another team owning the pool).
    shown_platform: Decimal = ZERO
    shown_other_teams: Decimal = ZERO
    # The team's GPU job cost on those nodes (training and inference), and how many nodes.
    job_cost: Decimal = ZERO
    nodes: int = 0

    @property
    def charged(self) -> Decimal:
        return self.kept + self.spread + self.commitment

    @property
    def shown(self) -> Decimal:
        return self.shown_platform + self.shown_other_teams

    @property
    def idle_share(self) -> Decimal | None:
        """Idle (charged and shown) as a share of the team's GPU cost with it (0.2 = 20 %)."""
        whole = self.job_cost + self.charged + self.shown
        return (self.charged + self.shown) / whole if whole > 0 else None


def idle_showback(*, month: date, teams: QuerySet[Team]) -> list[IdleShowback]:
    """Per team of `teams` and currency: the month's idle charged and shown (module docstring),
    teams by name; teams with neither idle nor GPU jobs on nodes are left out."""
    month_rows = AllocatedCost.objects.filter(billing_period=month).order_by()
    by_team = {team.pk: team for team in teams}
    result: dict[tuple[int, str], IdleShowback] = {}

    def row(team_id: int, currency: str) -> IdleShowback:
        key = (team_id, currency)
        if key not in result:
            result[key] = IdleShowback(team=by_team[team_id], currency=currency)
        return result[key]

    kinds = Case(
        When(~Q(node=""), then=Value(KEPT)),
        When(job__isnull=False, then=Value(SPREAD)),
        default=Value(COMMITMENT),
        output_field=CharField(),
    )
    charged = (
        month_rows.filter(category=Category.IDLE, team__in=teams)
        .annotate(kind=kinds)
        .values("team_id", "billing_currency", "kind")
        .annotate(amount=MoneySum("amount"))
    )
    for item in charged:
        target = row(item["team_id"], item["billing_currency"])
        setattr(target, item["kind"], getattr(target, item["kind"]) + item["amount"])

    if connections[month_rows.db].vendor == "postgresql":
        _shown_on_server(month_rows, month, by_team, row)
    else:
        _shown(_on_own_nodes(month_rows, teams), by_team, row)
    return sorted(result.values(), key=_order)


def _on_own_nodes(
    month_rows: QuerySet[AllocatedCost], teams: QuerySet[Team] | Collection[int]
) -> QuerySet[AllocatedCost]:
    """The month's rows on the nodes where the teams' jobs had GPU cost (none: no query)."""
    own_nodes = set(
        month_rows.filter(category__in=JOB_CATEGORIES, team__in=teams)
        .exclude(node="")
        .values_list("node", flat=True)
        .distinct()
    )
    return month_rows.filter(node__in=own_nodes) if own_nodes else month_rows.none()


def _order(r: IdleShowback) -> tuple[str, int, object]:
    return r.team.name, r.team.pk, currency_order(r.currency)


def idle_showback_stored(*, month: date, teams: QuerySet[Team]) -> list[IdleShowback] | None:
    """idle_showback(month, teams) as the month's attribution stored it; None when the month
    is not stored (attributed before the store existed): the caller computes it then."""
    stored = IdleShowbackMonth.objects.filter(billing_period=month).first()
    if stored is None:
        return None
    rows = IdleShowbackRow.objects.filter(month=stored, team__in=teams).select_related("team")
    result = [
        IdleShowback(
            team=r.team, currency=r.currency, **{name: getattr(r, name) for name in FIGURES}
        )
        for r in rows
    ]
    return sorted(result, key=_order)


NodeDay = tuple[str, date, str]
# A team's share of one node-day: (team id, currency, node, idle of the platform bucket, idle
# of other teams, the team's gross job cost (its weight), all jobs' gross cost, its job cost).
_Term = tuple[int, str, str, Decimal, Decimal, Decimal, Decimal, Decimal]


def _shown(
    rows: QuerySet[AllocatedCost],
    by_team: dict[int, Team],
    row: Callable[[int, str], IdleShowback],
) -> None:
    """Fill the shown idle and job cost of the teams in by_team from the rows on their nodes.

    Each team's shown idle is a sum of pro-rata shares (idle x weight / total) over node-days,
    rounded once: summed as Decimal bounds (core.bounded_sums), and as Fractions only for a
    figure whose bounds round apart (never seen; the figures are exact either way)."""
    jobs, idle = _node_days(rows)
    sums: dict[tuple[int, str], tuple[QuotientSum, QuotientSum]] = {}
    cost: dict[tuple[int, str], Decimal] = defaultdict(Decimal)
    nodes: dict[tuple[int, str], set[str]] = defaultdict(set)
    for team_id, currency, node, platform, others, weight, total, job_cost in _terms(
        jobs, idle, by_team
    ):
        team_key = (team_id, currency)
        if team_key not in sums:
            sums[team_key] = (QuotientSum(), QuotientSum())
        sums[team_key][0].add(platform, weight, total)
        sums[team_key][1].add(others, weight, total)
        cost[team_key] = EXACT.add(cost[team_key], job_cost)
        nodes[team_key].add(node)
    undecided: set[tuple[int, str]] = set()
    for team_key, (platform_sum, others_sum) in sums.items():
        target = row(*team_key)
        shown_platform = platform_sum.rounded(money_round)
        shown_others = others_sum.rounded(money_round)
        if shown_platform is None or shown_others is None:
            undecided.add(team_key)
        else:
            target.shown_platform, target.shown_other_teams = shown_platform, shown_others
        target.job_cost = money_round(cost[team_key])
        target.nodes = len(nodes[team_key])
    if undecided:
        _shown_exact(jobs, idle, by_team, undecided, row)


def _shown_on_server(
    month_rows: QuerySet[AllocatedCost],
    month: date,
    by_team: dict[int, Team],
    row: Callable[[int, str], IdleShowback],
) -> None:
    """_shown on PostgreSQL: the bounds of the shown idle summed by the server (one query,
    selectors.idle_shown_sql), rounded here; the keys whose bounds round apart summed again as
    Fractions (the figures are exact either way, the same as _shown's)."""
    undecided: set[tuple[int, str]] = set()
    for team_key, bounds in shown_bounds(month, list(by_team), using=month_rows.db).items():
        target = row(*team_key)
        platform = _rounded(bounds.platform_low, bounds.platform_high)
        others = _rounded(bounds.others_low, bounds.others_high)
        if platform is None or others is None:
            undecided.add(team_key)
        else:
            target.shown_platform, target.shown_other_teams = platform, others
        target.job_cost = money_round(bounds.job_cost)
        target.nodes = bounds.nodes
    if undecided:
        teams_apart = {team_id for team_id, _ in undecided}
        jobs, idle = _node_days(_on_own_nodes(month_rows, teams_apart))
        _shown_exact(jobs, idle, by_team, undecided, row)


def _rounded(low: Decimal, high: Decimal) -> Decimal | None:
    """The exact sum between low and high rounded, or None when the two round apart."""
    low_rounded, high_rounded = money_round(low), money_round(high)
    return low_rounded if low_rounded == high_rounded else None


def _node_days(
    rows: QuerySet[AllocatedCost],
) -> tuple[dict[NodeDay, dict[int | None, Decimal]], dict[NodeDay, dict[int | None, Decimal]]]:
    """Per node-day of rows: the job cost (training and inference) and the idle by team."""
    jobs: dict[NodeDay, dict[int | None, Decimal]] = defaultdict(dict)
    idle: dict[NodeDay, dict[int | None, Decimal]] = defaultdict(dict)
    grouped = (
        rows.filter(Q(category=Category.IDLE) | Q(category__in=JOB_CATEGORIES))
        .values("node", "day", "billing_currency", "team_id", "category")
        .annotate(amount=MoneySum("amount"))
        .values_list("node", "day", "billing_currency", "team_id", "category", "amount")
    )
    for node, day, currency, team_id, category, amount in _grouped_rows(grouped):
        key = (node, day, currency)
        into = idle if category == Category.IDLE else jobs
        into[key][team_id] = into[key].get(team_id, ZERO) + amount
    return jobs, idle


def _grouped_rows(grouped: QuerySet[Any, tuple[Any, ...]]) -> Iterable[tuple[Any, ...]]:
    """The grouped rows' value tuples. On PostgreSQL as psycopg hands them out (a date, an
    exact Decimal sum: what the ORM's converters return there) without running the converters
    on every cell: a month of 1,000 nodes has 344,000 of these rows."""
    if connections[grouped.db].vendor == "postgresql":
        return values_rows(grouped, (), chunk_size=20_000, raw=ALL)
    return grouped


def _terms(
    jobs: dict[NodeDay, dict[int | None, Decimal]],
    idle: dict[NodeDay, dict[int | None, Decimal]],
    by_team: dict[int, Team],
) -> Iterator[_Term]:
    """Every (team of by_team, node-day) share of the idle others bear (_Term)."""
    for key, costs in jobs.items():
        # Gross weights: a credit never makes a share negative (as the engine spreads idle).
        weights = {team_id: abs(amount) for team_id, amount in costs.items()}
        total = sum(weights.values(), ZERO)
        if total == 0:
            continue
        borne = idle.get(key, {})
        platform = borne.get(None, ZERO)
        for team_id, weight in weights.items():
            if team_id is None or team_id not in by_team or weight == 0:
                continue
            others = ZERO
            for t, amount in borne.items():
                if t is not None and t != team_id:
                    others = EXACT.add(others, amount)
            yield team_id, key[2], key[0], platform, others, weight, total, costs[team_id]


def _shown_exact(
    jobs: dict[NodeDay, dict[int | None, Decimal]],
    idle: dict[NodeDay, dict[int | None, Decimal]],
    by_team: dict[int, Team],
    keys: set[tuple[int, str]],
    row: Callable[[int, str], IdleShowback],
) -> None:
    """The shown idle of the (team, currency) keys summed as Fractions (exact, slow)."""
    shown: dict[tuple[int, str], list[Fraction]] = defaultdict(lambda: [Fraction(0)] * 2)
    for team_id, currency, _, platform, others, weight, total, _ in _terms(jobs, idle, by_team):
        if (team_id, currency) in keys:
            share = Fraction(weight) / Fraction(total)
            acc = shown[(team_id, currency)]
            acc[0] += Fraction(platform) * share
            acc[1] += Fraction(others) * share
    for key, (platform_sum, others_sum) in shown.items():
        target = row(*key)
        target.shown_platform = money_round(platform_sum)
        target.shown_other_teams = money_round(others_sum)
