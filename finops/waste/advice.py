"""What to change, with money (issue 31, part 3): per team, cluster, currency and pricing
category of a month, the observed interruption rate, the checkpoint interval that minimises the
expected loss (Young/Daly), what it would have saved, and the measured GPU utilisation of the
allocations with the cost left idle in them.

The pricing category of an attempt is how the ledger says its cost was bought (the kind that
carries most of it: spot, on demand, commitment, other; finops.waste.attempts): spot jobs are
interrupted far more often than on-demand ones, so each category has its own rate and interval.

Young/Daly, first order: with a checkpoint that takes C to write every tau, and a mean time M
between interruptions, the share of time lost is C / tau (writing checkpoints) + tau / (2 M)
(half an interval redone per interruption); it is least at tau* = sqrt(2 C M). The saving is
(loss at the current interval - loss at tau*) x the attempts' cost. M is the attempts'
wall-clock hours / their interruptions; the current interval is the median gap between the
checkpoints of the runs' metrics, else the pricing assumptions' interval; C is the setting
FINOPS_CHECKPOINT_WRITE_MINUTES (default 2 minutes): every figure names its assumptions.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction
from itertools import pairwise

from django.conf import settings as django_settings
from django.db.models import QuerySet

from finops.attribution.inputs.list_cost import COMMITMENT, MIX_KINDS, ON_DEMAND, OTHER, SPOT
from finops.attribution.models import RunCost
from finops.attribution.selectors.reporting import visible_to
from finops.core.money import EXACT, MONEY_QUANTUM
from finops.org.models import Team
from finops.run_metrics.selectors import RunKey
from finops.waste.attempts import Attempt, run_attempts, run_metrics
from finops.waste.causes import CAPACITY_STATES, INTERRUPTED_STATES, Settings
from finops.waste.selectors import RunWaste, run_waste_of, waste_settings

_MINUTES = Decimal(60)
_THOUSAND = Decimal(1000)
_MICROSECOND = dt.timedelta(microseconds=1)
_MICROSECONDS_PER_HOUR = 3_600_000_000
# Service jobs (JobRecord.service: servers and runners, not training) are a row of their own,
# whatever they were bought as: no checkpoint advice (they write no checkpoints), their idle
# allocation still counted (allocation_idle merges every row of a cluster).
SERVICE = "service"
# An inference endpoint's pods (JobRecord.endpoint; services too): a row of their own, no
# checkpoint advice, their idle allocation shown but not recommended by allocation_idle: the
# endpoint advice (rightsize, finops.pricing.recommendation_rules) reads the same measured
# utilisation of the same pods, and one idle GPU-hour is advised once.
ENDPOINT = "endpoint"
NO_CHECKPOINTS = frozenset({SERVICE, ENDPOINT})
PRICING_LABELS = {
    SPOT: "spot", ON_DEMAND: "on-demand", COMMITMENT: "committed", OTHER: "other",
    SERVICE: "service", ENDPOINT: "endpoint",
}  # fmt: skip
# Spot first: the category whose interval most often differs from the others'.
_PRICING_ORDER = {
    kind: i for i, kind in enumerate((SPOT, ON_DEMAND, COMMITMENT, OTHER, SERVICE, ENDPOINT))
}


def checkpoint_write_minutes() -> Decimal:
    """The setting FINOPS_CHECKPOINT_WRITE_MINUTES (finops/settings.py, default 2)."""
    return Decimal(str(django_settings.FINOPS_CHECKPOINT_WRITE_MINUTES))


@dataclass(slots=True)
class AdviceGroup:
    cost: Decimal = Decimal(0)
    hours: Decimal = Decimal(0)
    gpu_hours: Decimal = Decimal(0)
    interruptions: int = 0
    capacity_interruptions: int = 0
    gaps_minutes: list[Decimal] = field(default_factory=list)
    idle_in_allocation: Decimal = Decimal(0)
    measured_cost: Decimal = Decimal(0)
    used_cost: Decimal = Decimal(0)
    # The exact sums behind hours, gpu_hours and used_cost (advice_groups): summed as
    # Fractions and rounded once, so the figures do not depend on the order the runs are read
    # in (a sum of rounded quotients does, in its last digit: at a rounding tie, e.g. 717.675
    # hours over 4 interruptions, the quantized mean time between interruptions flipped).
    exact_hours: Fraction = Fraction(0)
    exact_gpu_hours: Fraction = Fraction(0)
    exact_used_cost: Fraction = Fraction(0)


@dataclass(frozen=True, slots=True)
class CheckpointAdvice:
    team: Team | None
    cluster: str
    currency: str
    # list_cost.pricing_mix of the attempts: spot, on_demand, commitment, other; or service
    # (the service jobs', whatever they were bought as: SERVICE), or endpoint (an inference
    # endpoint's pods: ENDPOINT).
    pricing: str
    cost: Decimal
    attempt_hours: Decimal
    gpu_hours: Decimal
    interruptions: int
    interruptions_per_gpu_hour: Decimal | None
    interruptions_per_thousand_gpu_hours: Decimal | None
    mean_hours_between_interruptions: Decimal | None
    checkpoint_write_minutes: Decimal
    current_interval_minutes: Decimal
    current_interval_source: str  # "metrics" or "assumption"
    optimal_interval_minutes: Decimal | None
    monthly_saving: Decimal
    # Cost-weighted measured utilisation of the attempts that have one; None: none measured.
    measured_utilisation: Decimal | None
    idle_in_allocation: Decimal
    # Exact sums behind measured_utilisation (to merge the categories of a cluster).
    measured_cost: Decimal = Decimal(0)
    used_cost: Decimal = Decimal(0)
    # Of the interruptions, the capacity losses only (PREEMPTED, NODE_FAIL: CAPACITY_STATES),
    # per 1,000 GPU-hours: what a spot decision weighs (FAILED and OUT_OF_MEMORY are the job's).
    capacity_interruptions: int = 0
    capacity_interruptions_per_thousand_gpu_hours: Decimal | None = None

    @property
    def pricing_label(self) -> str:
        return PRICING_LABELS.get(self.pricing, self.pricing)

    @property
    def no_checkpoints(self) -> bool:
        """A row of service jobs or endpoint pods: no checkpoint interval, no saving."""
        return self.pricing in NO_CHECKPOINTS

    @property
    def action(self) -> str:
        jobs = f"{self.pricing_label} jobs"
        if self.pricing == ENDPOINT:
            return (
                "Inference endpoints' pods write no checkpoints, and the endpoint advice "
                "(rightsize to a smaller GPU type) advises the GPUs they held idle: no "
                "checkpoint or idle-allocation advice of their own."
            )
        if self.pricing == SERVICE:
            return (
                "Service jobs (servers and runners, not training) write no checkpoints: no "
                "checkpoint advice."
            )
        if self.optimal_interval_minutes is None:
            return f"No interruption of {jobs} this month: keep the checkpoint interval."
        if self.current_interval_minutes <= 0:
            return (
                f"Checkpoint {jobs} every {self.optimal_interval_minutes:.0f} minutes "
                "(Young/Daly); the current interval is not known, so no saving is claimed."
            )
        now = f"{self.current_interval_minutes:.0f}"
        best = f"{self.optimal_interval_minutes:.0f}"
        if best == now or self.monthly_saving < Decimal("0.01"):
            return (
                f"Keep checkpointing {jobs} every {now} minutes: the Young/Daly interval "
                f"({self.optimal_interval_minutes} minutes) would save less than 0.01 "
                f"{self.currency} a month."
            )
        return (
            f"Checkpoint {jobs} every {best} minutes instead of {now}: saves "
            f"{self.monthly_saving:,.2f} {self.currency} a month at their interruption rate "
            "this month."
        )


@dataclass(frozen=True, slots=True)
class AllocationIdle:
    """The allocated GPU time left idle on a cluster, every pricing category together."""

    team: Team | None
    cluster: str
    currency: str
    cost: Decimal
    gpu_hours: Decimal
    measured_utilisation: Decimal | None
    idle_in_allocation: Decimal


def allocation_idle(rows: list[CheckpointAdvice]) -> list[AllocationIdle]:
    """The rows of checkpoint_advice merged per team, cluster and currency (same order), what
    the idle-allocation recommendation advises: an inference endpoint's pods (ENDPOINT rows) are
    left out, the endpoint advice (rightsize) reads the same utilisation of the same pods."""
    merged: dict[tuple[int | None, str, str], list[CheckpointAdvice]] = {}
    for row in rows:
        if row.pricing == ENDPOINT:
            continue
        team_id = row.team.pk if row.team else None
        merged.setdefault((team_id, row.cluster, row.currency), []).append(row)
    result = []
    for group in merged.values():
        measured = sum((r.measured_cost for r in group), Decimal(0))
        used = sum((r.used_cost for r in group), Decimal(0))
        utilisation = None
        if measured > 0:
            utilisation = EXACT.divide(used, measured).quantize(Decimal("0.0001"))
        first = group[0]
        result.append(
            AllocationIdle(
                team=first.team, cluster=first.cluster, currency=first.currency,
                cost=sum((r.cost for r in group), Decimal(0)),
                gpu_hours=sum((r.gpu_hours for r in group), Decimal(0)),
                measured_utilisation=utilisation,
                idle_in_allocation=sum((r.idle_in_allocation for r in group), Decimal(0)),
            )
        )  # fmt: skip
    return result


def _loss(interval: Decimal, write: Decimal, mtbi: Decimal) -> Decimal:
    """Share of the time lost at a checkpoint interval (all in minutes)."""
    return EXACT.divide(write, interval) + EXACT.divide(interval, 2 * mtbi)


# (team id, cluster, currency, pricing category): one row of checkpoint advice.
GroupKey = tuple[int | None, str, str, str]


def checkpoint_advice(
    *, month: dt.date, teams: QuerySet[Team], include_unowned: bool
) -> list[CheckpointAdvice]:
    """One row per team, cluster, currency and pricing category of the month's runs."""
    rollups = visible_to(
        RunCost.objects.filter(billing_period=month), teams=teams, include_unowned=include_unowned
    )
    # Plain rows (a month has tens of thousands of runs), their teams read once.
    keys = {
        RunKey(team_id, slug or "", run_id, currency)
        for team_id, slug, run_id, currency in rollups.order_by().values_list(
            "team_id", "team__slug", "run_id", "billing_currency"
        )
    }
    if not keys:
        return []
    found = Team.objects.in_bulk({k.team_id for k in keys if k.team_id is not None})
    config = waste_settings()
    attempts = run_attempts(keys)
    metrics = run_metrics(keys)
    wastes = [run_waste_of(key, attempts[key], metrics.get(key), config, month) for key in keys]
    return checkpoint_advice_of(month=month, wastes=wastes, teams=found, config=config)


def _run_order(key: RunKey) -> tuple[str, str, str, int]:
    return key.team_slug, key.run_id, key.currency, -1 if key.team_id is None else key.team_id


def advice_order(r: CheckpointAdvice) -> tuple[object, ...]:
    """The order of checkpoint_advice's rows: teams by slug (no team last), cluster, currency,
    spot first."""
    return (
        r.team is None, r.team.slug if r.team else "", r.cluster, r.currency,
        _PRICING_ORDER.get(r.pricing, len(_PRICING_ORDER)),
    )  # fmt: skip


def checkpoint_advice_of(
    *, month: dt.date, wastes: Iterable[RunWaste], teams: Mapping[int, Team], config: Settings
) -> list[CheckpointAdvice]:
    """checkpoint_advice from the month's waste of the runs (run_wastes(month=...) with
    `config`), their teams by id: the read-time panel and the stored rows (finops.economics)
    are this one function. The runs are summed in one fixed order (the run's team slug, run
    id, currency); the sums are exact (advice_groups), so the order only fixes the list of
    checkpoint gaps, whose median does not depend on it either."""
    groups = advice_groups(sorted(wastes, key=lambda w: _run_order(w.key)), month)
    return advice_rows(groups, config, teams=teams)


def advice_groups(wastes: Iterable[RunWaste], month: dt.date) -> dict[GroupKey, AdviceGroup]:
    """The month's attempts of these runs (their waste in that month, run_waste_of) summed per
    team, cluster, currency and pricing category: what advice_rows needs of them."""
    sums = AdviceSums(month)
    sums.add(wastes)
    return sums.groups()


class AdviceSums:
    """advice_groups taken in parts: add() the month's runs chunk by chunk (economics_refresh
    holds one chunk of runs at a time), groups() once at the end. Every sum is exact (money
    Decimals of 12 places in 28 digits, integer microseconds, Fractions) and the median of the
    gaps does not depend on their order, so the groups do not depend on how the runs were cut
    or the order they came in."""

    def __init__(self, month: dt.date) -> None:
        self.month = month
        self._groups: dict[GroupKey, AdviceGroup] = {}
        # The attempts' microseconds per group, and per group and GPU count: integers, made
        # the exact hour sums once at the end (the same Fractions as adding each attempt's,
        # without a Fraction per attempt: a month has hundreds of thousands).
        self._micros: dict[GroupKey, int] = defaultdict(int)
        self._gpu_micros: dict[GroupKey, dict[tuple[int, int], int]] = defaultdict(
            lambda: defaultdict(int)
        )

    def add(self, wastes: Iterable[RunWaste]) -> None:
        month, groups, micros, gpu_micros = self.month, self._groups, self._micros, self._gpu_micros
        for waste in wastes:
            key = waste.key
            for row in waste.attempts:
                a = row.attempt
                cost = a.cost_by_month.get(month, Decimal(0))
                pricing = _category(a)
                where = (key.team_id, a.cluster, key.currency, pricing)
                group = groups.get(where)
                if group is None:
                    group = groups[where] = AdviceGroup()
                group.cost += cost
                group.idle_in_allocation += row.parts.idle_in_allocation
                if a.utilisation is not None and cost > 0:
                    group.measured_cost += cost
                    group.exact_used_cost += Fraction(cost) * a.utilisation
                if a.start is None or a.end is None or a.end <= a.start:
                    continue
                span = (a.end - a.start) // _MICROSECOND
                micros[where] += span
                gpu_micros[where][a.gpus.numerator, a.gpus.denominator] += span
                group.interruptions += a.state in INTERRUPTED_STATES
                group.capacity_interruptions += a.state in CAPACITY_STATES
                marks = row.shares.checkpoints
                if len(marks) > 1:
                    group.gaps_minutes += [
                        Decimal((later - earlier).total_seconds()) / _MINUTES
                        for earlier, later in pairwise(marks)
                    ]

    def groups(self) -> dict[GroupKey, AdviceGroup]:
        """The groups of every run added, their hour sums made (call once, after the last
        add)."""
        for where, group in self._groups.items():
            group.exact_hours = Fraction(self._micros[where], _MICROSECONDS_PER_HOUR)
            group.exact_gpu_hours = sum(
                (
                    Fraction(span * numerator, _MICROSECONDS_PER_HOUR * denominator)
                    for (numerator, denominator), span in self._gpu_micros[where].items()
                ),
                Fraction(0),
            )
            group.hours = _decimal(group.exact_hours)
            group.gpu_hours = _decimal(group.exact_gpu_hours)
            group.used_cost = _decimal(group.exact_used_cost)
        return self._groups


def _category(a: Attempt) -> str:
    """The row an attempt is advised in: endpoint, service, else how its cost was bought."""
    if a.endpoint:
        return ENDPOINT
    if a.service:
        return SERVICE
    return a.pricing if a.pricing in MIX_KINDS else OTHER


def _decimal(value: Fraction) -> Decimal:
    """An exact sum as a Decimal, rounded once (the default 28 digits)."""
    return Decimal(value.numerator) / Decimal(value.denominator)


def advice_rows(
    groups: Mapping[GroupKey, AdviceGroup],
    config: Settings,
    *,
    teams: Mapping[int, Team] | None = None,
) -> list[CheckpointAdvice]:
    """The advice of each group (Young/Daly), in the order pages list it; `teams`: the groups'
    teams by id (None: read here). Groups of a team that no longer exists are left out (as a
    read of the month's runs leaves their runs out)."""
    if teams is None:
        teams = Team.objects.in_bulk({team_id for team_id, *_ in groups if team_id is not None})
    team_of: dict[int | None, Team | None] = {None: None}
    team_of.update(teams.items())
    write = checkpoint_write_minutes()
    assumed = config.checkpoint_interval_minutes
    result = [
        _advice(team_of[team_id], (cluster, currency, pricing), group, write, assumed)
        for (team_id, cluster, currency, pricing), group in groups.items()
        if team_id in team_of
    ]
    return sorted(result, key=advice_order)


def _advice(
    team: Team | None,
    where: tuple[str, str, str],
    g: AdviceGroup,
    write: Decimal,
    assumed_interval: Decimal,
) -> CheckpointAdvice:
    cluster, currency, pricing = where
    gaps = [gap for gap in g.gaps_minutes if gap > 0]
    if gaps:
        current, source = Decimal(statistics.median(gaps)), "metrics"
    else:
        current, source = assumed_interval, "assumption"
    mtbi = optimal = None
    saving = Decimal(0)
    rate = per_thousand = capacity_per_thousand = None
    if g.gpu_hours > 0:
        exact = EXACT.divide(Decimal(g.interruptions), g.gpu_hours)
        rate = exact.quantize(Decimal("0.000001"))
        per_thousand = (exact * _THOUSAND).quantize(Decimal("0.001"))
        capacity = EXACT.divide(Decimal(g.capacity_interruptions) * _THOUSAND, g.gpu_hours)
        capacity_per_thousand = capacity.quantize(Decimal("0.001"))
    # A service (an endpoint's pod too) writes no checkpoints: no interval to advise, no saving.
    if g.interruptions and g.hours > 0 and pricing not in NO_CHECKPOINTS:
        mtbi = EXACT.divide(g.hours, Decimal(g.interruptions))
        mtbi_minutes = mtbi * _MINUTES
        optimal = (2 * write * mtbi_minutes).sqrt(EXACT)
        # An interval or write time of 0 (settings at their bound) has no finite loss to
        # compare: the interval is still advised, the saving is not claimed.
        if current > 0 and optimal > 0:
            gain = _loss(current, write, mtbi_minutes) - _loss(optimal, write, mtbi_minutes)
            saving = max(Decimal(0), g.cost * gain).quantize(MONEY_QUANTUM, rounding=ROUND_DOWN)
        optimal = optimal.quantize(Decimal("0.01"))
        mtbi = mtbi.quantize(Decimal("0.0001"))
    utilisation = None
    if g.measured_cost > 0:
        utilisation = EXACT.divide(g.used_cost, g.measured_cost).quantize(Decimal("0.0001"))
    return CheckpointAdvice(
        team=team, cluster=cluster, currency=currency, pricing=pricing, cost=g.cost,
        attempt_hours=g.hours.quantize(Decimal("0.0001")),
        gpu_hours=g.gpu_hours.quantize(Decimal("0.0001")),
        interruptions=g.interruptions, interruptions_per_gpu_hour=rate,
        interruptions_per_thousand_gpu_hours=per_thousand,
        mean_hours_between_interruptions=mtbi, checkpoint_write_minutes=write,
        current_interval_minutes=current.quantize(Decimal("0.01")),
        current_interval_source=source, optimal_interval_minutes=optimal,
        monthly_saving=saving, measured_utilisation=utilisation,
        idle_in_allocation=g.idle_in_allocation, measured_cost=g.measured_cost,
        used_cost=g.used_cost, capacity_interruptions=g.capacity_interruptions,
        capacity_interruptions_per_thousand_gpu_hours=capacity_per_thousand,
    )  # fmt: skip
