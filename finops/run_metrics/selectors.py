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
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import Any

from django.db.models import Q, Sum

from billing_ingest.models import CostLineItem
from finops.attribution.inputs.catalogue import line_gpu_spec
from finops.attribution.models import AllocatedCost, RunCost
from finops.core.money import MONEY_QUANTUM, MoneySum
from finops.run_metrics.peaks import PeakFlops, gpu_family, peak_flops
from finops.run_metrics.progress import RunProgress, runs_progress, training_runs_matching

_CTX = Context(prec=60, rounding=ROUND_HALF_EVEN)
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


@dataclass(frozen=True, slots=True)
class _LedgerTotals:
    cost: Decimal | None
    gpu_seconds: Decimal
    months: list[date]


def _round(value: Decimal, quantum: Decimal) -> Decimal:
    return value.quantize(quantum, context=_CTX)


def _per(total: Decimal | None, count: int | None, unit: int) -> Decimal | None:
    if total is None or not count:
        return None
    return _round(_CTX.divide(total * unit, Decimal(count)), MONEY_QUANTUM)


def _team(key: RunKey) -> Q:
    """The run's team; a run no team owns (finance's view) is the rows without one."""
    return Q(team__isnull=True) if key.team_id is None else Q(team_id=key.team_id)


def _team_q(keys: Iterable[RunKey]) -> Q:
    teams = {k.team_id for k in keys}
    q = Q(team_id__in={t for t in teams if t is not None})
    if None in teams:
        q |= Q(team__isnull=True)
    return q


_CHUNK = 500


def _chunks(keys: list[RunKey]) -> Iterable[list[RunKey]]:
    for start in range(0, len(keys), _CHUNK):
        yield keys[start : start + _CHUNK]


def _ledger_totals(keys: list[RunKey]) -> dict[RunKey, _LedgerTotals]:
    """Cost (in the key's currency when it is the run's only one), GPU-seconds and months of
    each run's rollups: one query per 500 runs."""
    rows: dict[tuple[int | None, str], list[Any]] = defaultdict(list)
    for chunk in _chunks(keys):
        found = (
            RunCost.objects.filter(_team_q(chunk), run_id__in={k.run_id for k in chunk})
            .order_by()
            .values("team_id", "run_id", "billing_currency", "billing_period")
            .annotate(cost=MoneySum("cost"), seconds=Sum("gpu_seconds"))
        )
        for row in found:
            rows[(row["team_id"], row["run_id"])].append(row)
    result = {}
    for key in keys:
        mine = rows.get((key.team_id, key.run_id), [])
        currencies = {r["billing_currency"] for r in mine}
        cost = sum((r["cost"] for r in mine), Decimal(0)) if currencies == {key.currency} else None
        seconds = sum((r["seconds"] or Decimal(0) for r in mine), Decimal(0))
        months = sorted({r["billing_period"] for r in mine})
        result[key] = _LedgerTotals(cost=cost, gpu_seconds=seconds, months=months)
    return result


def _node_seconds(
    ledgers: dict[RunKey, _LedgerTotals],
) -> dict[RunKey, dict[str, Decimal]]:
    """GPU-seconds of each run per node (the billed resource), over its months: one query per
    500 runs."""
    keys = list(ledgers)
    by_run: dict[tuple[int | None, str], list[tuple[date, str, Decimal]]] = defaultdict(list)
    for chunk in _chunks(keys):
        months = {m for k in chunk for m in ledgers[k].months}
        if not months:
            continue
        rows = (
            AllocatedCost.objects.filter(
                _team_q(chunk),
                billing_period__in=months,
                run_id__in={k.run_id for k in chunk},
                gpu_seconds__gt=0,
            )
            .exclude(node="")
            .order_by()
            .values("team_id", "run_id", "billing_period", "node")
            .annotate(seconds=Sum("gpu_seconds"))
        )
        for r in rows:
            by_run[(r["team_id"], r["run_id"])].append(
                (r["billing_period"], r["node"], Decimal(r["seconds"]))
            )
    result: dict[RunKey, dict[str, Decimal]] = {}
    for key in keys:
        wanted = set(ledgers[key].months)
        seconds: dict[str, Decimal] = defaultdict(Decimal)
        for month, node, value in by_run.get((key.team_id, key.run_id), []):
            if month in wanted:
                seconds[node] += value
        result[key] = dict(seconds)
    return result


def _node_models(nodes: Iterable[str], months: Iterable[date]) -> dict[str, str]:
    """The GPU model of each node, from its line items (x_GpuModel, the instance catalogue)."""
    names = set(nodes)
    months = set(months)
    if not names or not months:
        return {}
    lines = (
        CostLineItem.objects.settled()
        .filter(billing_period__in=months)
        .filter(Q(resource_name__in=names) | Q(resource_id__in=names))
        .values_list("resource_name", "resource_id", "x_instance_type", "x_gpu_count",
                     "x_gpu_model", "sku_id", "resource_type")
        .distinct()
        .order_by()
    )  # fmt: skip
    models: dict[str, str] = {}
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


def _peak(seconds: dict[str, Decimal], models: dict[str, str], dtype: str) -> _Peak:
    by_model: dict[str, Decimal] = defaultdict(Decimal)
    peaks: dict[str, PeakFlops | None] = {}
    for node, node_seconds in seconds.items():
        model = models.get(node, "")
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
    return _Peak(capacity, _round(_CTX.divide(capacity, total), Decimal(1)), sources, gpu_model)


def _efficiency(
    key: RunKey, progress: RunProgress, ledger: _LedgerTotals, peak: _Peak
) -> RunEfficiency:
    tokens, samples = progress.useful_tokens, progress.useful_samples
    fpt = progress.flops_per_token
    mfu = None
    if peak.capacity and fpt and tokens is not None:
        mfu = _round(_CTX.divide(Decimal(fpt) * tokens, peak.capacity), RATIO_QUANTUM)
    gpu_hours = ledger.gpu_seconds / SECONDS_PER_HOUR
    per_hour = None
    if gpu_hours and tokens is not None:
        per_hour = _round(_CTX.divide(Decimal(tokens), gpu_hours), RATIO_QUANTUM)
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
    )


def run_efficiency_of(key: RunKey, progress: RunProgress) -> RunEfficiency:
    return _efficiencies({key: progress})[key]


def _efficiencies(progress: dict[RunKey, RunProgress]) -> dict[RunKey, RunEfficiency]:
    ledgers = _ledger_totals(list(progress))
    seconds = _node_seconds(ledgers)
    models = _node_models(
        {n for by_node in seconds.values() for n in by_node},
        {m for ledger in ledgers.values() for m in ledger.months},
    )
    return {
        key: _efficiency(key, p, ledgers[key], _peak(seconds[key], models, p.dtype))
        for key, p in progress.items()
    }


def run_efficiency(key: RunKey) -> RunEfficiency | None:
    """The run's efficiency; None when it has no metrics."""
    return run_efficiencies([key]).get(key)


def run_efficiencies(keys: Iterable[RunKey]) -> dict[RunKey, RunEfficiency | None]:
    """Efficiency of each run (None: no metrics). A fixed number of queries per 500 runs (their
    metrics points, ledger rollups, GPU-seconds per node and the nodes' GPU models)."""
    keys = list(keys)
    runs = training_runs_matching((k.team_slug, k.run_id) for k in keys)
    progress = runs_progress(runs.values())
    result: dict[RunKey, RunEfficiency | None] = {key: None for key in keys}
    measured: dict[RunKey, RunProgress] = {}
    for key in keys:
        run = runs.get((key.team_slug, key.run_id))
        found = progress.get(run.pk) if run is not None else None
        if found is not None and found.points:
            measured[key] = found
    result.update(_efficiencies(measured))
    return result


def run_cost_key(run: RunCost) -> RunKey:
    """The key of a run's ledger rollup."""
    slug = run.team.slug if run.team_id and run.team else ""
    return RunKey(run.team_id, slug, run.run_id, run.billing_currency)
