"""Efficiency of a training run (DESIGN section 9): what it bought per dollar and per GPU-hour.

Joined at read time: the run's metrics (progress.py) with its cost in the attribution ledger,
over every month and cluster the run has cost in (every attempt, waste included), so metrics that
arrived before the jobs join once attribution has run.

- useful tokens / samples: the final cumulative counts;
- $/1M training tokens = run cost / useful tokens x 10^6; $/1k samples likewise;
- tokens per GPU-hour = useful tokens / allocated GPU-hours (the ledger's GPU-seconds of the run:
  on a cluster charged by `used` GPUs those are the used GPU-seconds);
- MFU = flops_per_token x useful tokens / sum over the run's nodes of (GPU-seconds x the dense
  peak of the node's GPU model for the run's dtype); null when a node's model or the dtype has
  no peak in peaks.py. The peak shown is the GPU-second weighted mean (the model's own peak
  when the run used one model).
A run with cost in more than one billing currency has no money figures (null): its cost is not
one number without a conversion.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from django.db.models import Q

from billing_ingest.models import CostLineItem
from finops.attribution.inputs.catalogue import line_gpu_spec
from finops.attribution.models import AllocatedCost, RunCost
from finops.core.money import EXACT, MONEY_QUANTUM, MoneySum, exact_sum
from finops.run_metrics.peaks import PeakFlops, gpu_family, peak_flops
from finops.run_metrics.progress import RunProgress, run_progresses, training_runs_matching

RATIO_QUANTUM = Decimal("0.000001")
SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True, slots=True)
class RunKey:
    """A run as the ledger names it (RunCost's team and run id), and the currency asked for."""

    team_id: int | None
    team_slug: str
    run_id: str
    currency: str


@dataclass(frozen=True, slots=True)
class RunEfficiency:
    useful_tokens: int | None
    samples: int | None
    steps: int | None
    currency: str
    # The run's cost over every month and attempt (None: several currencies), its GPU-hours.
    cost: Decimal | None
    gpu_hours: Decimal
    cost_per_million_tokens: Decimal | None
    cost_per_thousand_samples: Decimal | None
    tokens_per_gpu_hour: Decimal | None
    mfu: Decimal | None
    flops_per_token: int | None
    peak_flops_per_gpu: Decimal | None
    peak_source: str
    gpu_model: str
    dtype: str
    # The ledger's GPU-seconds behind gpu_hours (gpu_hours = gpu_seconds / 3600).
    gpu_seconds: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class _LedgerTotals:
    cost: Decimal | None
    gpu_seconds: Decimal
    months: list[date]


def _round(value: Decimal, quantum: Decimal) -> Decimal:
    return value.quantize(quantum, context=EXACT)


def _per(total: Decimal | None, count: int | None, unit: int) -> Decimal | None:
    if total is None or not count:
        return None
    return _round(EXACT.divide(total * unit, Decimal(count)), MONEY_QUANTUM)


def _team_q(team_ids: Iterable[int | None], field: str = "team") -> Q:
    """Rows of these teams; None is the rows no team owns (finance's view)."""
    ids = set(team_ids)
    q = Q(**{f"{field}_id__in": sorted(t for t in ids if t is not None)})
    if None in ids:
        q |= Q(**{f"{field}__isnull": True})
    return q


_CHUNK = 900


def _chunks(values: Iterable[str]) -> Iterable[list[str]]:
    items = sorted(set(values))
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


@dataclass(frozen=True, slots=True)
class RunLedgerFacts:
    """What the efficiency formula reads of the ledger for one run: its totals over every
    month, its GPU-seconds per node over those months and each node's GPU model."""

    ledger: _LedgerTotals
    node_seconds: dict[str, Decimal]
    node_models: dict[str, str]


def run_ledger_facts(keys: Iterable[RunKey]) -> dict[RunKey, RunLedgerFacts]:
    """RunLedgerFacts of many runs: a fixed number of queries (per 900 run ids), whatever the
    number of runs (the rollup of a month, a page of the runs list, a team's trend)."""
    keys = list(keys)
    if not keys:
        return {}
    team_q = _team_q(k.team_id for k in keys)
    totals: dict[tuple[int | None, str], list[_PeriodTotal]] = defaultdict(list)
    seconds: dict[tuple[int | None, str], list[tuple[date, str, Decimal]]] = defaultdict(list)
    for chunk in _chunks(k.run_id for k in keys):
        for row in (
            RunCost.objects.filter(team_q, run_id__in=chunk)
            .order_by()
            .values_list("team_id", "run_id", "billing_currency", "billing_period")
            .annotate(cost=MoneySum("cost"), seconds=exact_sum("gpu_seconds", decimal_places=6))
        ):
            team_id, run_id, currency, period, cost, total_seconds = row
            totals[(team_id, run_id)].append(
                _PeriodTotal(
                    currency, period, Decimal(str(cost or 0)), Decimal(str(total_seconds or 0))
                )
            )
        for team_id, run_id, period, node, node_seconds in (
            AllocatedCost.objects.filter(team_q, run_id__in=chunk, gpu_seconds__gt=0)
            .exclude(node="")
            .order_by()
            .values_list("team_id", "run_id", "billing_period", "node")
            .annotate(seconds=exact_sum("gpu_seconds", decimal_places=6))
        ):
            seconds[(team_id, run_id)].append((period, node, Decimal(node_seconds)))
    ledgers: dict[RunKey, _LedgerTotals] = {}
    per_node: dict[RunKey, dict[str, Decimal]] = {}
    for key in keys:
        ledger = _ledger_of(key, totals.get((key.team_id, key.run_id), []))
        ledgers[key] = ledger
        months = set(ledger.months)
        by_node: dict[str, Decimal] = defaultdict(Decimal)
        for period, node, node_seconds in seconds.get((key.team_id, key.run_id), []):
            if period in months:
                by_node[node] += node_seconds
        per_node[key] = dict(by_node)
    every_month = sorted({m for ledger in ledgers.values() for m in ledger.months})
    models = _node_models({n for by_node in per_node.values() for n in by_node}, every_month)
    return {
        key: RunLedgerFacts(
            ledgers[key], per_node[key], {n: models[n] for n in per_node[key] if n in models}
        )
        for key in keys
    }


@dataclass(frozen=True, slots=True)
class _PeriodTotal:
    currency: str
    month: date
    cost: Decimal
    seconds: Decimal


def _ledger_of(key: RunKey, rows: list[_PeriodTotal]) -> _LedgerTotals:
    """The run's totals over its months (cost None when it has cost in several currencies)."""
    currencies = {r.currency for r in rows}
    cost = sum((r.cost for r in rows), Decimal(0)) if currencies == {key.currency} else None
    total = sum((r.seconds for r in rows), Decimal(0))
    return _LedgerTotals(cost=cost, gpu_seconds=total, months=sorted({r.month for r in rows}))


def _node_models(nodes: Iterable[str], months: list[date]) -> dict[str, str]:
    """The GPU model of each node, from its line items (x_GpuModel, the instance catalogue)."""
    names = set(nodes)
    models: dict[str, str] = {}
    if not names or not months:
        return models
    for chunk in _chunks(names):
        lines = (
            CostLineItem.objects.settled()
            .filter(billing_period__in=months)
            .filter(Q(resource_name__in=chunk) | Q(resource_id__in=chunk))
            .values_list("resource_name", "resource_id", "x_instance_type", "x_gpu_count",
                         "x_gpu_model", "sku_id", "resource_type")
            .distinct()
            .order_by()
        )  # fmt: skip
        for name, resource_id, x_type, x_count, x_model, sku, res_type in lines:
            spec = line_gpu_spec(
                x_instance_type=x_type, x_gpu_count=x_count, x_gpu_model=x_model, sku_id=sku,
                resource_type=res_type,
            )  # fmt: skip
            if spec is None or not spec.model:
                continue
            for node in (name, resource_id):
                if node in names:
                    models.setdefault(node, spec.model)
    return models


@dataclass(frozen=True, slots=True)
class _Peak:
    capacity: Decimal | None  # FLOP the run's GPU-seconds could have done at peak
    per_gpu: Decimal | None
    source: str
    gpu_model: str


def _peak(facts: RunLedgerFacts, dtype: str) -> _Peak:
    by_model: dict[str, Decimal] = defaultdict(Decimal)
    peaks: dict[str, PeakFlops | None] = {}
    for node, node_seconds in facts.node_seconds.items():
        model = facts.node_models.get(node, "")
        family = gpu_family(model) or model or "unknown"
        by_model[family] += node_seconds
        peaks[family] = peak_flops(model, dtype) if model else None
    gpu_model = ", ".join(sorted(by_model))
    if not by_model or any(peak is None for peak in peaks.values()):
        return _Peak(None, None, "", gpu_model)
    capacity = sum(
        (s * peak.flops for family, s in by_model.items() if (peak := peaks[family])),
        Decimal(0),
    )
    total = sum(by_model.values(), Decimal(0))
    sources = "; ".join(sorted({p.source for p in peaks.values() if p is not None}))
    return _Peak(capacity, _round(EXACT.divide(capacity, total), Decimal(1)), sources, gpu_model)


def efficiency_from(key: RunKey, progress: RunProgress, facts: RunLedgerFacts) -> RunEfficiency:
    """The formula (pure): a run's metrics and its ledger facts in, its efficiency out. The
    read-time selectors and the stored rollup (finops.economics) both call this."""
    ledger = facts.ledger
    tokens, samples = progress.useful_tokens, progress.useful_samples
    peak = _peak(facts, progress.dtype)
    fpt = progress.flops_per_token
    mfu = None
    if peak.capacity and fpt and tokens is not None:
        mfu = _round(EXACT.divide(Decimal(fpt) * tokens, peak.capacity), RATIO_QUANTUM)
    gpu_hours = ledger.gpu_seconds / SECONDS_PER_HOUR
    per_hour = None
    if gpu_hours and tokens is not None:
        per_hour = _round(EXACT.divide(Decimal(tokens), gpu_hours), RATIO_QUANTUM)
    return RunEfficiency(
        useful_tokens=tokens,
        samples=samples,
        steps=progress.final_step,
        currency=key.currency,
        cost=ledger.cost,
        gpu_hours=gpu_hours,
        cost_per_million_tokens=_per(ledger.cost, tokens, 10**6),
        cost_per_thousand_samples=_per(ledger.cost, samples, 10**3),
        tokens_per_gpu_hour=per_hour,
        mfu=mfu,
        flops_per_token=fpt,
        peak_flops_per_gpu=peak.per_gpu,
        peak_source=peak.source,
        gpu_model=peak.gpu_model,
        dtype=progress.dtype,
        gpu_seconds=ledger.gpu_seconds,
    )


def run_efficiency_of(key: RunKey, progress: RunProgress) -> RunEfficiency:
    return efficiency_from(key, progress, run_ledger_facts([key])[key])


def run_efficiency(key: RunKey) -> RunEfficiency | None:
    """The run's efficiency; None when it has no metrics."""
    return run_efficiencies([key]).get(key)


def run_efficiencies(keys: Iterable[RunKey]) -> dict[RunKey, RunEfficiency | None]:
    """Efficiency of each run (None: no metrics). A fixed number of queries however many runs
    (the metrics points of the runs that have them, their ledger facts)."""
    keys = list(keys)
    runs = training_runs_matching((k.team_slug, k.run_id) for k in keys)
    progresses = run_progresses(runs.values())
    result: dict[RunKey, RunEfficiency | None] = {}
    measured: list[tuple[RunKey, RunProgress]] = []
    for key in keys:
        run = runs.get((key.team_slug, key.run_id))
        progress = progresses.get(run.pk) if run is not None else None
        if progress is None or not progress.points:
            result[key] = None
            continue
        measured.append((key, progress))
    facts = run_ledger_facts(k for k, _ in measured)
    for key, progress in measured:
        result[key] = efficiency_from(key, progress, facts[key])
    return result


def run_cost_key(run: RunCost) -> RunKey:
    """The key of a run's ledger rollup."""
    slug = run.team.slug if run.team_id and run.team else ""
    return RunKey(run.team_id, slug, run.run_id, run.billing_currency)
