"""Reads for the run planner (planner.py): who offers the GPU, at what price, and the MFU a team
has measured on it.

Offers: every instance type of the price catalogue (refreshed prices first, the dated snapshot
behind: finops.pricing.prices) whose GPU is the asked family, with the pricing assumptions'
interruption rate of its band. MFU: the median of the team's most recent measured runs (at most
RECENT_RUNS) on that GPU family and precision (DESIGN section 9's MFU; runs with no MFU are left
out), else the organisation's, each with how many runs it comes from, so the planner's default
is never a figure without a basis.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import F

from finops.attribution.inputs.catalogue import gpu_spec, normalise_instance_type
from finops.attribution.models import RunCost
from finops.core.wording import counted
from finops.org.models import Team
from finops.pricing.comparison import HOURS_PER_MONTH, Assumptions
from finops.pricing.comparisons import assumptions_current
from finops.pricing.prices import quote
from finops.pricing.snapshot import snapshot
from finops.run_metrics.models import TrainingRun
from finops.run_metrics.peaks import gpu_family, peak_flops
from finops.run_metrics.planner import (
    Offer,
    PlanEstimate,
    PlanRequest,
    SpotTerms,
    estimate,
    on_prem_option,
)
from finops.run_metrics.selectors import RunKey, run_efficiencies


@dataclass(frozen=True, slots=True)
class MeasuredMfu:
    mfu: Decimal
    runs: int
    scope: str  # "team" or "organisation"
    run_ids: tuple[str, ...]


def _catalogue_types() -> Iterable[tuple[str, str, str, int | None]]:
    """(provider, instance type, region, GPUs per instance) of every snapshot entry."""
    for entry in snapshot()["prices"]:
        gpus = entry.get("gpus")
        yield entry["provider"], entry["instance_type"], entry["region"], gpus


def offers_for(gpu_model: str, assumptions: Assumptions) -> list[Offer]:
    """Every priced instance type carrying `gpu_model`'s family, one region each."""
    family = gpu_family(gpu_model)
    if family is None:
        return []
    seen: set[tuple[str, str]] = set()
    offers: list[Offer] = []
    for provider, instance_type, region, gpus in _catalogue_types():
        key = (provider, normalise_instance_type(instance_type))
        spec = gpu_spec(instance_type)
        if key in seen or spec is None or gpu_family(spec.model) != family:
            continue
        seen.add(key)
        found = quote(provider, instance_type, region)
        if found is None or not found.hourly:
            continue
        offers.append(
            Offer(
                provider=provider,
                instance_type=instance_type,
                region=region,
                gpus_per_instance=int(gpus or spec.count),
                currency=found.currency,
                hourly=dict(found.hourly),
                sources=dict(found.sources),
                interruption_rate=assumptions.interruption_rate(
                    instance_type, region, found.interruption_band
                ),
            )
        )
    return offers


def on_prem_gpu_hour_rate(assumptions: Assumptions) -> Decimal:
    """The pricing assumptions' total cost of ownership per GPU-hour at full use."""
    return assumptions.node_month_tco / (HOURS_PER_MONTH * assumptions.gpus_per_node)


# The measured MFU is the median of the most recent runs with metrics: each run's efficiency is
# a few queries, and a team of the six-month demo has 1,200 measured runs (31 s for all of them).
RECENT_RUNS = 50


def _team_keys(team: Team | None) -> list[RunKey]:
    """The most recent (by last end) runs with metrics, of the team or of everyone."""
    runs = TrainingRun.objects.values_list("run_id", flat=True)
    rows = RunCost.objects.filter(run_id__in=runs)
    if team is not None:
        rows = rows.filter(team=team)
    keys: list[RunKey] = []
    ordered = (
        rows.select_related("team")
        .only("team_id", "team__slug", "run_id", "billing_currency", "last_end")
        .order_by(F("last_end").desc(nulls_last=True), "run_id", "pk")
    )
    for r in ordered.iterator():
        key = RunKey(r.team_id, r.team.slug if r.team else "", r.run_id, r.billing_currency)
        if key not in keys:
            keys.append(key)
        if len(keys) == RECENT_RUNS:
            break
    return sorted(keys, key=lambda k: (k.team_slug, k.run_id, k.currency))


def _median(keys: list[RunKey], family: str, dtype: str) -> tuple[Decimal, list[str]] | None:
    measured: dict[str, Decimal] = {}
    for key, e in run_efficiencies(keys).items():
        if e is None or e.mfu is None or e.dtype != dtype:
            continue
        if gpu_family(e.gpu_model) != family:
            continue
        measured[f"{key.team_slug}/{key.run_id}"] = e.mfu
    if not measured:
        return None
    return statistics.median(measured.values()), sorted(measured)


def measured_mfu(team: Team | None, gpu_model: str, dtype: str) -> MeasuredMfu | None:
    """The team's median measured MFU on the GPU family, else the organisation's; None when
    no run on that GPU has one."""
    family = gpu_family(gpu_model)
    if family is None:
        return None
    scopes: list[tuple[str, Team | None]] = [("organisation", None)]
    if team is not None:
        scopes.insert(0, ("team", team))
    for scope, who in scopes:
        found = _median(_team_keys(who), family, dtype)
        if found is not None:
            mfu, runs = found
            return MeasuredMfu(mfu=mfu, runs=len(runs), scope=scope, run_ids=tuple(runs))
    return None


class PlanError(ValueError):
    """A plan that cannot be made (unknown GPU or precision, no MFU to plan with)."""


@dataclass(frozen=True, slots=True)
class PlannedRun:
    request: PlanRequest
    estimate: PlanEstimate
    mfu_basis: str
    measured: MeasuredMfu | None
    peak_source: str
    dtype: str
    assumptions: list[str]


def run_plan(
    *,
    team: Team | None,
    model_params: int,
    tokens: int,
    gpu_model: str,
    gpu_count: int,
    dtype: str,
    mfu: Decimal | None,
    flops_per_token: int | None,
) -> PlannedRun:
    peak = peak_flops(gpu_model, dtype)
    if peak is None:
        raise PlanError(f"no dense peak for {gpu_model!s} in {dtype!s}: MFU cannot be planned")
    measured = measured_mfu(team, gpu_model, dtype)
    if mfu is not None:
        basis = "given"
    elif measured is not None:
        mfu = measured.mfu
        basis = f"median measured MFU of {counted(measured.runs, 'run')} of the {measured.scope}"
    else:
        raise PlanError(
            f"no measured run on {peak.gpu} in {dtype}: give the MFU to plan with (0.3 to 0.55 "
            "is typical of large dense models on H100)"
        )
    request = PlanRequest(
        model_params=model_params,
        tokens=tokens,
        gpu_model=peak.gpu,
        gpu_count=gpu_count,
        mfu=mfu,
        peak_flops_per_gpu=peak.flops,
        flops_per_token=flops_per_token,
    )
    assumptions = assumptions_current()
    terms = SpotTerms(assumptions.checkpoint_interval_minutes, assumptions.restart_minutes)
    on_prem = on_prem_option(
        request,
        rate_per_gpu_hour=on_prem_gpu_hour_rate(assumptions),
        currency=assumptions.currency,
        source="pricing settings: total cost of ownership per GPU-hour at full use",
    )
    estimate_ = estimate(request, offers_for(peak.gpu, assumptions), terms, extra=[on_prem])
    notes = [
        f"work = {'given FLOPs per token' if flops_per_token else '6 x parameters'} per token "
        f"x {tokens:,} tokens",
        f"{peak.gpu} dense {dtype} peak {peak.tflops:f} TFLOPS ({peak.source})",
        f"MFU {mfu:f}: {basis}",
        "instances are whole: a GPU count that does not fill them pays for the rest",
        "spot: any interrupted instance rolls every GPU back to the last checkpoint; each "
        "interruption loses half the "
        f"{assumptions.checkpoint_interval_minutes:f}-minute checkpoint interval plus "
        f"{assumptions.restart_minutes:f} minutes of restart (pricing settings)",
        "reserved: the effective hourly rate of a commitment already held; not advice to buy a "
        "term for one run",
        "every figure is an estimate",
    ]
    return PlannedRun(request, estimate_, basis, measured, peak.source, dtype, notes)
