"""Reads: the pricing comparison of a run and of a team's month (issue 13).

The scope of a comparison is GPU compute: ledger rows on a node or of a job (training,
inference, and idle, including idle spread onto jobs). Its `actual` is their EffectiveCost,
its on-demand equivalent their ListCost (split exactly as cost by attribution).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Max, Q, QuerySet

from billing_ingest.models import CostLineItem
from finops.attribution.inputs.catalogue import gpu_spec
from finops.attribution.inputs.list_cost import MIX_KINDS, UNPRICED
from finops.attribution.models import (
    AllocatedCost,
    AttributionRun,
    Category,
    RunCost,
    TeamDailyCost,
)
from finops.core.money import MoneySum, exact_sum
from finops.core.months import month_format, month_next
from finops.currency.selectors import FxRateMissing, fx_rate_for
from finops.org.models import Team
from finops.pricing import prices
from finops.pricing.comparison import Assumptions, MeasuredPower, TypeUsage, compare
from finops.pricing.models import PricingAssumptions, TeamTypeUsage, TeamUsageMonth

GPU_CATEGORIES = (Category.TRAINING, Category.INFERENCE, Category.IDLE)
_ZERO = Decimal(0)
_SECONDS_PER_HOUR = Decimal(3600)
_SECONDS_PER_DAY = Decimal(86400)


def assumptions_current() -> Assumptions:
    """The stored assumptions, each value that fails validation replaced by its default (and
    a warning saying so), so no stored setting can break a figure."""
    row = PricingAssumptions.current()
    warnings = row.usable()
    return Assumptions(
        spot_price_ratio=row.spot_price_ratio,
        interruption_bands={k: Decimal(str(v)) for k, v in row.interruption_bands.items()},
        family_bands={str(k).lower(): str(v) for k, v in (row.family_bands or {}).items()},
        default_band=row.default_band,
        checkpoint_interval_minutes=row.checkpoint_interval_minutes,
        restart_minutes=row.restart_minutes,
        notice_seconds={str(k): int(v) for k, v in row.notice_seconds.items()},
        reserved_ratios={k: Decimal(str(v)) for k, v in row.reserved_ratios.items()},
        node_capex=row.node_capex,
        amortisation_months=row.amortisation_months,
        gpus_per_node=row.gpus_per_node,
        watts_per_gpu=row.watts_per_gpu,
        pue=row.pue,
        price_per_kwh=row.price_per_kwh,
        rack_per_node_month=row.rack_per_node_month,
        network_per_node_month=row.network_per_node_month,
        staff_per_node_month=row.staff_per_node_month,
        currency=row.currency,
        utilisation_window_days=row.utilisation_window_days,
        recommendation_percentile=row.recommendation_percentile,
        warnings=tuple(warnings),
    )


def _node_types(month: dt.date) -> dict[str, tuple[str, str]]:
    """Ledger node name -> (instance type, region) from the month's node line items."""
    rows = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .exclude(x_instance_type="")
        .values_list("resource_name", "resource_id", "x_instance_type", "region_id")
        .distinct()
    )
    found: dict[str, tuple[str, str]] = {}
    for name, resource_id, instance_type, region in rows:
        for key in node_keys(name, resource_id):
            found.setdefault(key, (instance_type, region))
    return found


def node_keys(name: str, resource_id: str) -> list[str]:
    """The names the ledger may give a billed node: its resource name, its id, and the id's
    last path segment (an Azure or GCP resource path)."""
    keys = (name, resource_id, resource_id.rstrip("/").rsplit("/", 1)[-1])
    return [key for key in keys if key]


class _Catalogue:
    """The catalogue's figures of each (provider, type, region), read once per request."""

    def __init__(self) -> None:
        self._quotes: dict[tuple[str, str, str], prices.PriceQuote | None] = {}
        self._bodies: dict[tuple[str, str, str], dict[str, Any] | None] = {}

    def quote(self, key: tuple[str, str, str]) -> prices.PriceQuote | None:
        if key not in self._quotes:
            self._quotes[key] = prices.quote(*key)
        return self._quotes[key]

    def body(self, key: tuple[str, str, str]) -> dict[str, Any] | None:
        if key not in self._bodies:
            self._bodies[key] = prices.price_body(*key)
        return self._bodies[key]


def _type_usage(key: tuple[str, str, str], sums: list[Decimal], catalogue: _Catalogue) -> TypeUsage:
    provider, instance_type, region = key
    listed, hours, unpriced = sums
    spec = gpu_spec(instance_type) if instance_type else None
    found = catalogue.quote(key)
    reserved = {} if found is None else {k: found.ratio(k) for k in prices.RESERVED_KINDS}
    return TypeUsage(
        provider=provider,
        instance_type=instance_type,
        region=region,
        on_demand=listed,
        gpu_hours=hours,
        unpriced=unpriced,
        gpus_per_node=spec.count if spec else 8,
        spot_ratio=None if found is None else found.ratio("spot"),
        reserved_ratios={k: r for k, r in reserved.items() if r is not None},
        interruption_band=None if found is None else found.interruption_band,
        # Every known type is listed, so a way of buying it without a figure is said so ("no
        # published price in snapshot") beside the ratio that stood in.
        prices=catalogue.body(key),
    )


UsageSums = dict[tuple[Any, ...], dict[tuple[str, str, str], list[Decimal]]]


def usage_sums(month: dt.date, rows: QuerySet[AllocatedCost], scope: tuple[str, ...]) -> UsageSums:
    """Per scope (the values of the `scope` fields, e.g. team and currency), per (provider,
    instance type, region): [on-demand equivalent, GPU-seconds, cost with no list price], in
    one read."""
    types = _node_types(month)
    grouped: UsageSums = defaultdict(lambda: defaultdict(lambda: [_ZERO] * 3))
    sums = (
        rows.values_list(*scope, "provider_name", "node", "list_cost_source")
        .annotate(
            listed=MoneySum("list_cost"),
            cost=MoneySum("amount"),
            seconds=exact_sum("gpu_seconds", decimal_places=6),
        )
        .order_by()
    )
    width = len(scope)
    for row in sums:
        provider, node, source, listed, cost, seconds = row[width:]
        instance_type, region = types.get(node, ("", ""))
        acc = grouped[tuple(row[:width])][(provider, instance_type, region)]
        acc[0] += listed or _ZERO
        acc[1] += seconds or _ZERO
        # Usage with no list price anywhere (or rows written before the source was kept):
        # its on-demand figure is unknown (list_cost).
        if source in (UNPRICED, ""):
            acc[2] += cost or _ZERO
    return grouped


def _usage_of(grouped: UsageSums, catalogue: _Catalogue) -> dict[tuple[Any, ...], list[TypeUsage]]:
    return {
        key: [
            _type_usage(k, [listed, seconds / _SECONDS_PER_HOUR, unpriced], catalogue)
            for k, (listed, seconds, unpriced) in sorted(by_type.items())
        ]
        for key, by_type in grouped.items()
    }


def _usage_by(
    month: dt.date, rows: QuerySet[AllocatedCost], scope: tuple[str, ...], catalogue: _Catalogue
) -> dict[tuple[Any, ...], list[TypeUsage]]:
    """Per scope: its on-demand equivalent and GPU-hours per (provider, instance type, region)."""
    return _usage_of(usage_sums(month, rows, scope), catalogue)


def _usage_month_current(month: dt.date) -> TeamUsageMonth | None:
    """What the pricing step stored for the month, while the attribution it summed is still
    the month's newest; None otherwise (read the ledger)."""
    stored = TeamUsageMonth.objects.filter(billing_period=month).first()
    if stored is None or stored.attributed_at != newest_attribution(month=month):
        return None
    return stored


def _team_usage_stored(month: dt.date, teams: QuerySet[Team]) -> UsageSums:
    """The teams' usage of the month as the pricing step stored it (TeamTypeUsage)."""
    grouped: UsageSums = defaultdict(dict)
    rows = TeamTypeUsage.objects.filter(billing_period=month, team__in=teams).values_list(
        "team_id",
        "currency",
        "provider",
        "instance_type",
        "region",
        "listed",
        "gpu_seconds",
        "unpriced",
    )
    for team_id, currency, provider, instance_type, region, listed, seconds, unpriced in rows:
        grouped[(team_id, currency)][(provider, instance_type, region)] = [
            listed,
            seconds,
            unpriced,
        ]
    return grouped


def newest_attribution(*, month: dt.date) -> dt.datetime | None:
    """When the month's newest successful attribution finished (None: never attributed)."""
    found: dt.datetime | None = AttributionRun.objects.filter(
        billing_period=month, status=AttributionRun.Status.SUCCEEDED
    ).aggregate(at=Max("finished_at"))["at"]
    return found


def gpu_rows(month: dt.date) -> QuerySet[AllocatedCost]:
    return AllocatedCost.objects.filter(billing_period=month).filter(
        Q(job__isnull=False) | ~Q(node="")
    )


def on_prem_rate(*, assumptions: Assumptions, currency: str, month: dt.date) -> Decimal | None:
    """The rate from the on-prem assumptions' currency to a scope's, on the month's last day
    (1 when they are the same; None when no FX rate converts them)."""
    if assumptions.currency == currency:
        return Decimal(1)
    try:
        rate = fx_rate_for(
            day=month_next(month) - dt.timedelta(days=1),
            from_currency=assumptions.currency,
            to_currency=currency,
        )
    except FxRateMissing:
        return None
    return Decimal(rate.numerator) / Decimal(rate.denominator)


def gpu_jobs_and_idle(*, month: dt.date) -> tuple[Decimal, Decimal]:
    """The month's GPU node cost held by jobs, and left idle (every currency)."""
    totals = dict(
        gpu_rows(month)
        .filter(category__in=GPU_CATEGORIES)
        .values_list("category")
        .annotate(s=MoneySum("amount"))
        .order_by()
    )
    used = sum((v for k, v in totals.items() if k != Category.IDLE and v), _ZERO)
    return used, totals.get(Category.IDLE) or _ZERO


def utilisation_of(used: Decimal, idle: Decimal) -> Decimal | None:
    whole = used + idle
    return used / whole if whole > 0 and used > 0 else None


def cluster_utilisation(*, month: dt.date) -> Decimal | None:
    """Measured GPU utilisation of the month: job cost / all GPU node cost (jobs + idle)."""
    return utilisation_of(*gpu_jobs_and_idle(month=month))


def _cluster_utilisation_of(month: dt.date, stored: TeamUsageMonth | None) -> Decimal | None:
    """The measured cluster utilisation as the pricing step stored it with the month's usage
    (`stored`: current), else summed from the ledger."""
    if stored is not None and stored.gpu_jobs_cost is not None and stored.gpu_idle_cost is not None:
        return utilisation_of(stored.gpu_jobs_cost, stored.gpu_idle_cost)
    return cluster_utilisation(month=month)


@dataclass(frozen=True)
class TeamUse:
    """A team's GPU-seconds over the days from its first use in a window, and its peak day's
    (a reservation sized to cover every day is sized to the peak)."""

    gpu_seconds: Decimal
    peak_day_seconds: Decimal
    days: int

    @property
    def utilisation(self) -> Decimal:
        """Mean / peak daily GPUs in use."""
        return self.gpu_seconds / (self.peak_day_seconds * self.days)

    @property
    def peak_gpus(self) -> Decimal:
        """The peak day's mean GPUs in use."""
        return self.peak_day_seconds / _SECONDS_PER_DAY


def team_use(*, team_id: int | None, until: dt.date, days: int) -> TeamUse | None:
    """Mean and peak daily GPUs in use by the team over the window ending before `until`, from
    the team's first day with GPU use in it (None: no GPU use)."""
    since = until - dt.timedelta(days=days)
    daily: dict[dt.date, Decimal | None] = dict(
        TeamDailyCost.objects.filter(Q(team_id=team_id), day__gte=since, day__lt=until)
        .values_list("day")
        .annotate(s=exact_sum("gpu_seconds", decimal_places=6))
        .order_by()
    )
    values = [v for v in daily.values() if v]
    if not values:
        return None
    first = min(day for day, v in daily.items() if v)
    span = (until - first).days or 1
    return TeamUse(gpu_seconds=sum(values, _ZERO), peak_day_seconds=max(values), days=span)


def team_utilisation(*, team_id: int | None, until: dt.date, days: int) -> Decimal | None:
    """Mean / peak daily GPUs in use by the team over the window ending before `until`: the
    share of a commitment sized to the peak the team would have used."""
    use = team_use(team_id=team_id, until=until, days=days)
    return use.utilisation if use is not None else None


def run_pricing(
    *, run: RunCost, org_wide: bool, measured: MeasuredPower | None = None
) -> dict[str, Any]:
    """`org_wide`: the viewer may see figures that depend on other teams' use (finance).
    `measured`: the run's measured GPU energy of the month (finops.energy), for on-prem power."""
    month = run.billing_period
    rows = gpu_rows(month).filter(
        Q(team_id=run.team_id), run_id=run.run_id, billing_currency=run.billing_currency
    )
    if run.cluster:
        rows = rows.filter(job__cluster=run.cluster)
    a = assumptions_current()
    usage = _usage_by(month, rows, (), _Catalogue()).get((), [])
    use = team_use(team_id=run.team_id, until=month_next(month), days=a.utilisation_window_days)
    body = compare(
        actual=run.cost,
        on_demand_estimated=run.list_cost_estimated,
        mix={kind: getattr(run, f"cost_{kind}") for kind in MIX_KINDS},
        usage=usage,
        assumptions=a,
        team_utilisation=use.utilisation if use is not None else None,
        cluster_utilisation=cluster_utilisation(month=month) if org_wide else None,
        currency=run.billing_currency,
        on_prem_rate=on_prem_rate(assumptions=a, currency=run.billing_currency, month=month),
        measured=measured,
        peak_gpus=use.peak_gpus if use is not None else None,
    )
    return {"run_id": run.run_id, "month": month_format(month), **body}


def team_month_pricing(
    *,
    month: dt.date,
    teams: QuerySet[Team],
    org_wide: bool,
    power: Mapping[int, MeasuredPower] | None = None,
) -> list[dict[str, Any]]:
    """One comparison per team (and billing currency) with GPU cost in the month. `org_wide`:
    the viewer may see figures that depend on other teams' use (finance). `power`: per team
    id, its measured GPU energy of the month (finops.energy), for the on-prem power."""
    a = assumptions_current()
    stored = _usage_month_current(month)
    measured = _cluster_utilisation_of(month, stored) if org_wide else None
    daily = TeamDailyCost.objects.filter(
        billing_period=month, team__in=teams, category__in=GPU_CATEGORIES
    )
    totals = (
        daily.values_list("team_id", "billing_currency")
        .annotate(
            actual=MoneySum("amount"),
            estimated=MoneySum("list_cost_estimated"),
            **{kind: MoneySum(f"cost_{kind}") for kind in MIX_KINDS},
        )
        .order_by()
    )
    slugs = dict(Team.objects.filter(pk__in=teams).values_list("pk", "slug"))
    if stored is not None:
        grouped = _team_usage_stored(month, teams)
    else:
        grouped = usage_sums(
            month, gpu_rows(month).filter(team__in=teams), ("team_id", "billing_currency")
        )
    usage = _usage_of(grouped, _Catalogue())
    result = []
    for team_id, currency, actual, estimated, *mix_values in totals:
        use = team_use(team_id=team_id, until=month_next(month), days=a.utilisation_window_days)
        body = compare(
            actual=actual or _ZERO,
            on_demand_estimated=estimated or _ZERO,
            mix=dict(zip(MIX_KINDS, (v or _ZERO for v in mix_values), strict=True)),
            usage=usage.get((team_id, currency), []),
            assumptions=a,
            team_utilisation=use.utilisation if use is not None else None,
            cluster_utilisation=measured,
            currency=currency,
            on_prem_rate=on_prem_rate(assumptions=a, currency=currency, month=month),
            measured=(power or {}).get(team_id),
            peak_gpus=use.peak_gpus if use is not None else None,
        )
        result.append({"team": slugs[team_id], "month": month_format(month), **body})
    return sorted(result, key=lambda r: (r["team"], r["currency"]))
