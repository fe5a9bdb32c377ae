"""Reads for the recommendations (issue 27): what the ledger, the bills and the job logs say a
month (and the 90 days before its end) used, shaped for finops.pricing.recommendation_rules.

- Nodes: each billed GPU node's provider, instance type, region, how it was bought (pricing
  mix of its usage lines) and GPUs, from the line items of the window's months.
- Demand: GPUs in use per hour by each team on each (provider, type, region, mix), from the
  jobs the ledger attributes to the team (a job's GPUs split evenly over its nodes).
- Supply: nodes billed per hour per pool (provider, type, region, mix), from the node lines.
- Money: the month's ledger rows per team, node and run (paid, on-demand equivalent, GPU-hours).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
from django.db.models import Max, Min, Q

from billing_ingest.models import CostLineItem, JobGpuUtilisation, JobRecord
from finops.attribution.inputs.catalogue import gpu_spec
from finops.attribution.inputs.list_cost import pricing_mix
from finops.attribution.models import AllocatedCost, Category
from finops.core.money import MoneySum, exact_sum
from finops.core.months import month_add, month_next
from finops.core.sql_arrays import epoch_micros, epoch_seconds, from_epoch_micros
from finops.pricing import demand, snapshot
from finops.pricing.comparisons import node_keys

WINDOW_DAYS = 90
_ZERO = Decimal(0)
_SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True)
class NodeInfo:
    provider: str
    instance_type: str
    region: str
    mix: str
    gpus: int

    @property
    def pool(self) -> tuple[str, str, str, str]:
        return (self.provider, self.instance_type, self.region, self.mix)


@dataclass(frozen=True)
class Window:
    month: dt.date
    since: dt.datetime
    until: dt.datetime

    @property
    def hours(self) -> int:
        return int((self.until - self.since).total_seconds() // 3600)

    @property
    def month_hours(self) -> int:
        start = dt.datetime.combine(self.month, dt.time(), dt.UTC)
        return int((self.until - start).total_seconds() // 3600)


def window_of(month: dt.date) -> Window:
    until = dt.datetime.combine(month_next(month), dt.time(), dt.UTC)
    return Window(month, until - dt.timedelta(days=WINDOW_DAYS), until)


def _gpus_of(instance_type: str, counted: int | None) -> int | None:
    """The type's GPUs: the bill's count, else the instance catalogue's, else the price
    snapshot's; None for a type with no GPU (storage, CPU nodes)."""
    if counted:
        return counted
    spec = gpu_spec(instance_type)
    if spec is not None:
        return spec.count
    entry = snapshot.price_entry_any(instance_type)
    return int(entry["gpus"]) if entry and entry.get("gpus") else None


def nodes_of(window: Window) -> dict[str, NodeInfo]:
    """Billed node name (resource name, id, and the id's last path segment) -> its NodeInfo."""
    months = {window.since.date().replace(day=1), window.month}
    month = window.since.date().replace(day=1)
    while month < window.month:
        months.add(month)
        month = month_add(month, 1)
    lines = (
        CostLineItem.objects.settled()
        .filter(billing_period__in=months, charge_category__iexact="usage")
        .exclude(x_instance_type="")
        .values_list(
            "resource_name", "resource_id", "provider_name", "x_instance_type", "region_id",
            "pricing_category", "sku_id", "commitment_discount_id", "x_gpu_count",
        )
        .distinct()
    )  # fmt: skip
    found: dict[str, NodeInfo] = {}
    for name, resource_id, provider, instance_type, region, category, sku, cid, count in lines:
        gpus = _gpus_of(instance_type, count)
        if gpus is None:
            continue
        mix = pricing_mix(pricing_category=category, sku_id=sku, commitment_discount_id=cid)
        info = NodeInfo(provider, instance_type, region, mix, gpus)
        for key in node_keys(name, resource_id):
            found.setdefault(key, info)
    return found


@dataclass(frozen=True)
class Job:
    pk: int
    job_id: str
    team_id: int | None
    start: dt.datetime
    end: dt.datetime
    gpus: Decimal
    nodes: tuple[str, ...]
    run_id: str
    cluster: str
    state: str
    endpoint: str


def jobs_of(window: Window) -> list[Job]:
    """The jobs the ledger attributes to a team (or to none) in the window, with their team."""
    ledger = AllocatedCost.objects.filter(
        job__isnull=False,
        billing_period__gte=window.since.date().replace(day=1),
        billing_period__lte=window.month,
    )
    team_of = dict(ledger.values_list("job_id", "team_id").distinct())
    jobs = JobRecord.objects.filter(pk__in=ledger.values("job_id"), start__isnull=False)
    # The times as integers (finops.core.sql_arrays: Django's timestamptz loader is slow).
    rows = jobs.values_list(
        "pk", "job_id", epoch_micros(jobs, "start"), epoch_micros(jobs, "end"), "gpus", "nodes",
        "run_id", "cluster", "state", "endpoint",
    )  # fmt: skip
    return [
        Job(pk, job_id, team_of.get(pk), start, from_epoch_micros(end) or window.until, gpus,
            tuple(nodes or ()), run_id, cluster, state, endpoint)
        for pk, job_id, start_at, end, gpus, nodes, run_id, cluster, state, endpoint in rows
        if (start := from_epoch_micros(start_at)) is not None
    ]  # fmt: skip


DemandKey = tuple[int | None, str, str, str, str]  # team, provider, type, region, mix


def demand_curves(
    jobs: Iterable[Job], nodes: dict[str, NodeInfo], window: Window
) -> dict[DemandKey, demand.Curve]:
    """GPUs held per hour of the window by (team, provider, type, region, mix): on each node
    the jobs' GPUs, at most the node's GPUs (held_and_requested)."""
    return held_and_requested(jobs, nodes, window)[0]


def held_and_requested(
    jobs: Iterable[Job], nodes: dict[str, NodeInfo], window: Window
) -> tuple[dict[DemandKey, demand.Curve], dict[DemandKey, demand.Curve]]:
    """(GPUs held, GPUs requested) per hour of the window by (team, provider, type, region,
    mix). Requested: each job's GPUs split evenly over its nodes, summed. Held: on a node whose
    jobs ask in an hour for more GPUs than it has (overlapping jobs, a job whose end the
    scheduler never reported), each team's part scaled down pro rata so the node holds its
    GPUs at most: demand never exceeds the nodes that serve it."""
    by_node: dict[str, dict[int | None, list[tuple[float, float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for job in jobs:
        share = float(job.gpus) / len(job.nodes) if job.nodes else 0.0
        for name in job.nodes:
            if name in nodes:
                by_node[name][job.team_id].append(
                    (job.start.timestamp(), job.end.timestamp(), share)
                )
    start = window.since.timestamp()
    held: dict[DemandKey, demand.Curve] = {}
    requested: dict[DemandKey, demand.Curve] = {}
    for name, by_team in by_node.items():
        info = nodes[name]
        curves = {t: demand.hourly(s, start=start, hours=window.hours) for t, s in by_team.items()}
        total = sum(curves.values(), np.zeros(window.hours))
        scale = np.where(total > info.gpus, info.gpus / np.maximum(total, 1e-12), 1.0)
        for team_id, curve in curves.items():
            key = (team_id, *info.pool)
            requested[key] = requested[key] + curve if key in requested else curve
            part = curve * scale
            held[key] = held[key] + part if key in held else part
    return held, requested


def history_starts(jobs: Iterable[Job]) -> dict[int | None, dt.datetime]:
    """Each team's first job start (its demand history begins there)."""
    first: dict[int | None, dt.datetime] = {}
    for job in jobs:
        if job.team_id not in first or job.start < first[job.team_id]:
            first[job.team_id] = job.start
    return first


def supply_curves(
    nodes: dict[str, NodeInfo], window: Window
) -> dict[tuple[str, str, str, str], demand.Curve]:
    """Nodes billed per hour of the month by pool (provider, type, region, mix)."""
    start = dt.datetime.combine(window.month, dt.time(), dt.UTC)
    month_lines = (
        CostLineItem.objects.settled()
        .filter(billing_period=window.month, charge_category__iexact="usage")
        .exclude(x_instance_type="")
    )
    # The times as integers (finops.core.sql_arrays): a month of hourly node lines is millions.
    lines = month_lines.values_list(
        "resource_name",
        epoch_micros(month_lines, "charge_period_start"),
        epoch_micros(month_lines, "charge_period_end"),
    )
    spans: dict[tuple[str, str, str, str], dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for name, begin, end in lines:
        info = nodes.get(name)
        if info is not None and begin is not None and end is not None:
            spans[info.pool][name].append((epoch_seconds(begin), epoch_seconds(end)))
    curves = {}
    for pool, by_node in spans.items():
        # A node billed by several lines for one hour (compute + its GPU SKU) counts once.
        merged = [(a, b, 1.0) for periods in by_node.values() for a, b in _merge(periods)]
        curves[pool] = demand.hourly(merged, start=start.timestamp(), hours=window.month_hours)
    return curves


def pool_gpus(
    supply: dict[tuple[str, str, str, str], demand.Curve], nodes: dict[str, NodeInfo]
) -> dict[tuple[str, str, str, str], int]:
    """Each pool's capacity: the most nodes billed in an hour of the month x GPUs a node."""
    gpus = {info.pool: info.gpus for info in nodes.values()}
    return {
        pool: int(np.floor(curve.max() + 1e-6)) * gpus.get(pool, 8)
        for pool, curve in supply.items()
        if len(curve)
    }


def _merge(periods: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(periods):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


@dataclass
class Money:
    """Ledger sums: paid (EffectiveCost), on-demand equivalent (ListCost), GPU-hours."""

    paid: Decimal = _ZERO
    listed: Decimal = _ZERO
    gpu_hours: Decimal = _ZERO

    def add(self, paid: Decimal | None, listed: Decimal | None, seconds: Decimal | None) -> None:
        self.paid += paid or _ZERO
        self.listed += listed or _ZERO
        self.gpu_hours += (seconds or _ZERO) / _SECONDS_PER_HOUR


# (team, currency, provider, type, region, mix) -> the team's job rows on such nodes.
RateKey = tuple[int | None, str, str, str, str, str]


def job_money(month: dt.date, nodes: dict[str, NodeInfo]) -> dict[RateKey, Money]:
    """The month's job rows (training and inference) per team, currency and node kind."""
    rows = (
        AllocatedCost.objects.filter(billing_period=month, job__isnull=False)
        .exclude(node="")
        .values_list("team_id", "billing_currency", "node")
        .annotate(
            p=MoneySum("amount"),
            l=MoneySum("list_cost"),
            s=exact_sum("gpu_seconds", decimal_places=6),
        )
        .order_by()
    )
    sums: dict[RateKey, Money] = defaultdict(Money)
    for team_id, currency, node, paid, listed, seconds in rows:
        info = nodes.get(node)
        if info is not None:
            sums[(team_id, currency, *info.pool)].add(paid, listed, seconds)
    return sums


def per_held_gpu_hour(
    rates: dict[RateKey, Money], held: dict[DemandKey, demand.Curve], window: Window
) -> dict[RateKey, Money]:
    """The rates with their GPU-hours the GPUs the team held in the month (held curve), not
    the ledger's: on an over-asked node the ledger counts every job's GPUs in full and splits
    the node's cost among them, which would halve the price of a GPU-hour. Currencies of one
    team and pool share the held hours pro rata to the ledger's."""
    ledger: dict[DemandKey, Decimal] = defaultdict(Decimal)
    for (team_id, _, *pool), money in rates.items():
        ledger[(team_id, pool[0], pool[1], pool[2], pool[3])] += money.gpu_hours
    out = {}
    for key, money in rates.items():
        team_id, _, provider, instance_type, region, mix = key
        demand_key = (team_id, provider, instance_type, region, mix)
        curve = held.get(demand_key)
        hours = (
            Decimal(repr(float(curve[-window.month_hours :].sum()))) if curve is not None else _ZERO
        )
        total = ledger[demand_key]
        if hours <= 0 or total <= 0:
            out[key] = money
            continue
        out[key] = Money(money.paid, money.listed, hours * money.gpu_hours / total)
    return out


@dataclass
class RunMoney:
    """One run's on-demand training rows in the month, per node kind, and its attempts."""

    team_id: int | None
    currency: str
    run_id: str
    cluster: str
    by_pool: dict[tuple[str, str, str, str], Money] = field(default_factory=dict)
    longest_hours: float = 0.0
    attempts: int = 0


def on_demand_runs(month: dt.date, nodes: dict[str, NodeInfo]) -> list[RunMoney]:
    """Training runs with cost on on-demand nodes in the month (the spot candidates)."""
    rows = (
        AllocatedCost.objects.filter(
            billing_period=month, category=Category.TRAINING, job__isnull=False,
            pricing_mix="on_demand",
        )
        .exclude(node="")
        .values_list("team_id", "billing_currency", "run_id", "job__cluster", "node")
        .annotate(
            p=MoneySum("amount"), l=MoneySum("list_cost"),
            s=exact_sum("gpu_seconds", decimal_places=6),
        )
        .order_by()
    )  # fmt: skip
    runs: dict[tuple[int | None, str, str, str], RunMoney] = {}
    for team_id, currency, run_id, cluster, node, paid, listed, seconds in rows:
        info = nodes.get(node)
        if info is None:
            continue
        run = runs.setdefault(
            (team_id, currency, run_id, cluster), RunMoney(team_id, currency, run_id, cluster)
        )
        run.by_pool.setdefault(info.pool, Money()).add(paid, listed, seconds)
    _attempts(month, runs)
    return list(runs.values())


def _attempts(month: dt.date, runs: dict[tuple[int | None, str, str, str], RunMoney]) -> None:
    """Each run's attempts (jobs) and its longest one, in hours."""
    wanted = {(team_id, run_id, cluster) for team_id, _, run_id, cluster in runs}
    until = dt.datetime.combine(month_next(month), dt.time(), dt.UTC)
    rows = AllocatedCost.objects.filter(billing_period=month, category=Category.TRAINING).filter(
        job__isnull=False
    )
    # The times as integers (finops.core.sql_arrays: Django's timestamptz loader is slow).
    spans = (
        rows.values_list("team_id", "run_id", "job__cluster", "job_id")
        .annotate(
            start_at=Min(epoch_micros(rows, "job__start")),
            end_at=Max(epoch_micros(rows, "job__end")),
        )
        .order_by()
    )
    longest: dict[tuple[int | None, str, str], tuple[float, int]] = {}
    for team_id, run_id, cluster, _, start_at, end_at in spans:
        key = (team_id, run_id, cluster)
        start, end = from_epoch_micros(start_at), from_epoch_micros(end_at)
        if key not in wanted or start is None:
            continue
        # A job with no end (still running, or its end never reported) lasts to the month's end.
        hours = ((end or until) - start).total_seconds() / 3600
        most, count = longest.get(key, (0.0, 0))
        longest[key] = (max(most, hours), count + 1)
    for (team_id, _, run_id, cluster), run in runs.items():
        run.longest_hours, run.attempts = longest.get((team_id, run_id, cluster), (0.0, 0))


def idle_money(month: dt.date, nodes: dict[str, NodeInfo]) -> dict[tuple, Money]:
    """Per (pool, team bearing it, currency): the idle rows of the month; and per (pool, None,
    currency, "all"): everything billed on the pool's nodes."""
    rows = (
        AllocatedCost.objects.filter(billing_period=month)
        .filter(Q(category=Category.IDLE) | Q(job__isnull=False))
        .exclude(node="")
        .values_list("node", "category", "team_id", "billing_currency")
        .annotate(
            p=MoneySum("amount"),
            l=MoneySum("list_cost"),
            s=exact_sum("gpu_seconds", decimal_places=6),
        )
        .order_by()
    )
    sums: dict[tuple, Money] = defaultdict(Money)
    for node, category, team_id, currency, paid, listed, seconds in rows:
        info = nodes.get(node)
        if info is None:
            continue
        sums[(info.pool, None, currency, "all")].add(paid, listed, seconds)
        if category == Category.IDLE:
            sums[(info.pool, team_id, currency, "idle")].add(paid, listed, seconds)
    return sums


def endpoint_utilisation(
    window: Window, jobs: Iterable[Job]
) -> dict[tuple[int | None, str], tuple[Decimal, Decimal]]:
    """(team, endpoint) -> (measured GPU utilisation weighted by GPU-hours, GPU-hours measured)
    over the month's serving jobs that have a measured utilisation (JobGpuUtilisation)."""
    month_start = dt.datetime.combine(window.month, dt.time(), dt.UTC)
    serving = [j for j in jobs if j.endpoint and j.end > month_start]
    measured = {
        (cluster, job_id): util
        for cluster, job_id, util in JobGpuUtilisation.objects.filter(
            cluster__in={j.cluster for j in serving}
        ).values_list("cluster", "job_id", "utilisation")
    }
    acc: dict[tuple[int | None, str], list[Decimal]] = defaultdict(lambda: [_ZERO, _ZERO])
    for job in serving:
        util = measured.get((job.cluster, job.job_id))
        if util is None:
            continue
        seconds = (job.end - max(job.start, month_start)).total_seconds()
        gpu_hours = job.gpus * Decimal(max(seconds, 0.0)) / _SECONDS_PER_HOUR
        acc[(job.team_id, job.endpoint)][0] += util * gpu_hours
        acc[(job.team_id, job.endpoint)][1] += gpu_hours
    return {key: (used / total, total) for key, (used, total) in acc.items() if total > 0}


def endpoint_money(
    month: dt.date, nodes: dict[str, NodeInfo]
) -> dict[tuple[int | None, str, str], dict[tuple[str, str, str, str], Money]]:
    """(team, currency, endpoint) -> its serving rows of the month per node kind."""
    rows = (
        AllocatedCost.objects.filter(
            billing_period=month, category=Category.INFERENCE, job__isnull=False
        )
        .exclude(node="")
        .exclude(job__endpoint="")
        .values_list("team_id", "billing_currency", "job__endpoint", "node")
        .annotate(
            p=MoneySum("amount"),
            l=MoneySum("list_cost"),
            s=exact_sum("gpu_seconds", decimal_places=6),
        )
        .order_by()
    )
    out: dict[tuple[int | None, str, str], dict[tuple[str, str, str, str], Money]] = defaultdict(
        dict
    )
    for team_id, currency, endpoint, node, paid, listed, seconds in rows:
        info = nodes.get(node)
        if info is not None:
            out[(team_id, currency, endpoint)].setdefault(info.pool, Money()).add(
                paid, listed, seconds
            )
    return out
