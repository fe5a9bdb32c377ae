"""The recommendations as actions with their money (issue 27, DESIGN section 10). Pure: inputs
come from finops.pricing.recommendation_inputs, prices from the catalogue (PriceQuote).

- commit (recommendation_commits): per team and (provider, type, region) of on-demand nodes,
  or per provider where a savings plan covers every type (AWS, Azure), commit to the P-th
  percentile (setting, default P10) of the GPUs the team had in use per hour over the longest
  of the last 30/60/90 days its history fills, to a tenth of a GPU. Savings per month =
  730 x (mean over those hours of min(demand, N) x paid GPU-hour - N x committed GPU-hour);
  break-even = months of the year's commitment the covered use must last to pay for it
  (12 x N x committed / mean covered use x paid). The paid GPU-hour is the team's own
  EffectiveCost / GPU-hours on those nodes (the bill's currency: a contract rate below list
  counts), the committed GPU-hour its ListCost / GPU-hours x the catalogue's term price / on
  demand, else the configured ratio (then a lower confidence, and said so).
- spot: per team, the training runs on on-demand nodes whose every attempt lasted at most
  SHORT_ATTEMPT_HOURS ("short": an interruption loses little), priced as the comparison prices
  spot: ListCost x spot ratio x (1 + interruptions per node-hour x hours lost per interruption),
  a loss of half the checkpoint interval (at most half the attempt) plus the restart.
- idle: per on-demand or spot pool (provider, type, region, how bought), the nodes that stood
  idle in (100 - P)% of the month's billed hours (nodes billed - nodes the GPUs in use needed)
  can be released: savings = K x the pool's cost per node-hour x 730.
- rightsize: per team and endpoint whose serving jobs' measured GPU utilisation is at most
  RIGHTSIZE_UTILISATION: the provider's smaller GPU type (SMALLER_TYPES) at the same GPU count;
  savings = cost x (1 - its GPU-hour price / the current one). Confidence low.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np

from finops.core.months import month_format
from finops.pricing import demand
from finops.pricing.comparison import HOURS_PER_MONTH, Assumptions
from finops.pricing.prices import PriceQuote, provider_key
from finops.pricing.recommendation_inputs import (
    DemandKey,
    Money,
    NodeInfo,
    RunMoney,
    Window,
)

CENT = Decimal("0.01")
TENTH = Decimal("0.1")
SHORT_ATTEMPT_HOURS = 4
RIGHTSIZE_UTILISATION = Decimal("0.20")
# The provider's smaller serving GPU, priced from the catalogue (L40S on AWS and CoreWeave, L4 on
# GCP, one A100 PCIe on Azure).
SMALLER_TYPES = {
    "aws": "g6e.xlarge",
    "gcp": "g2-standard-8",
    "azure": "Standard_NC24ads_A100_v4",
    "coreweave": "gd-8xl40s-i128",
}
Quotes = Mapping[tuple[str, str, str], PriceQuote | None]


@dataclass(frozen=True)
class Draft:
    team_id: int | None
    kind: str
    key: str
    title: str
    action: str
    monthly_savings: Decimal
    currency: str
    confidence: str
    assumptions: dict[str, Any]
    evidence: dict[str, Any]


def money_text(value: Decimal, currency: str) -> str:
    return f"{value.quantize(CENT, rounding=ROUND_HALF_EVEN):,.2f} {currency}"


def cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_EVEN)


def as_decimal(value: float) -> Decimal:
    return Decimal(repr(value))


def lower_confidence(confidence: str) -> str:
    return {"high": "medium", "medium": "low"}.get(confidence, "low")


# --- spot --------------------------------------------------------------------------------------


@dataclass
class _SpotRun:
    run: RunMoney
    paid: Decimal
    spot: Decimal
    rework_hours: Decimal
    interruptions: Decimal
    estimated: bool


def spot_drafts(
    *,
    runs: Sequence[RunMoney],
    gpus: Mapping[str, int],
    quotes: Quotes,
    a: Assumptions,
    window: Window,
) -> list[Draft]:
    by_team: dict[tuple[int | None, str], list[_SpotRun]] = defaultdict(list)
    for run in runs:
        if run.attempts == 0 or run.longest_hours > SHORT_ATTEMPT_HOURS:
            continue
        priced = _spot_run(run, gpus, quotes, a)
        if priced is not None and priced.paid > priced.spot:
            by_team[(run.team_id, run.currency)].append(priced)
    return [_spot(team_id, currency, found, a, window) for (team_id, currency), found in
            by_team.items()]  # fmt: skip


def _spot_run(
    run: RunMoney, gpus: Mapping[str, int], quotes: Quotes, a: Assumptions
) -> _SpotRun | None:
    loss_minutes = min(a.checkpoint_interval_minutes, Decimal(run.longest_hours * 60)) / 2
    loss_hours = (loss_minutes + a.restart_minutes) / 60
    out = _SpotRun(run, Decimal(0), Decimal(0), Decimal(0), Decimal(0), False)
    for (provider, instance_type, region, _), money in run.by_pool.items():
        if money.listed <= 0:
            return None
        quote = quotes.get((provider, instance_type, region))
        ratio = quote.ratio("spot") if quote is not None else None
        if ratio is None:
            ratio, out.estimated = a.spot_price_ratio, True
        band = quote.interruption_band if quote is not None else None
        rate = a.interruption_rate(instance_type, region, band)
        out.paid += money.paid
        out.spot += money.listed * ratio * (1 + rate * loss_hours)
        out.rework_hours += money.gpu_hours * rate * loss_hours
        out.interruptions += money.gpu_hours / max(gpus.get(instance_type, 8), 1) * rate
    return out


def _spot(
    team_id: int | None, currency: str, runs: list[_SpotRun], a: Assumptions, window: Window
) -> Draft:
    runs.sort(key=lambda r: (r.spot - r.paid, r.run.run_id))
    savings = cents(sum((r.paid - r.spot for r in runs), Decimal(0)))
    rework = sum((r.rework_hours for r in runs), Decimal(0))
    paid = sum((r.paid for r in runs), Decimal(0))
    estimated = any(r.estimated for r in runs)
    month = f"{window.month:%B %Y}"
    these = "this training run" if len(runs) == 1 else f"these {len(runs):,} training runs"
    they = "it" if len(runs) == 1 else "they"
    action = (
        f"Run {these} on spot: every attempt lasted at most {SHORT_ATTEMPT_HOURS} hours, so an "
        f"interruption loses little. On spot {they} would have "
        f"cost {money_text(savings, currency)} less in {month} "
        f"({money_text(paid, currency)} paid on demand), net of "
        f"{rework.quantize(TENTH)} GPU-hours of expected rework."
    )
    top = [
        {
            "run_id": r.run.run_id, "cluster": r.run.cluster, "paid": str(cents(r.paid)),
            "on_spot": str(cents(r.spot)), "savings": str(cents(r.paid - r.spot)),
            "longest_attempt_hours": f"{r.run.longest_hours:.1f}", "attempts": r.run.attempts,
            "expected_interruptions": f"{r.interruptions:.3f}",
        }
        for r in runs[:10]
    ]  # fmt: skip
    return Draft(
        team_id=team_id, kind="spot", key="short-training-runs",
        title=f"Move {len(runs):,} short training run{'s' if len(runs) > 1 else ''} to spot",
        action=action,
        monthly_savings=savings, currency=currency,
        confidence="low" if estimated else "medium",
        assumptions={
            "short_attempt_hours": SHORT_ATTEMPT_HOURS,
            "checkpoint_interval_minutes": str(a.checkpoint_interval_minutes),
            "restart_minutes": str(a.restart_minutes),
            "spot_ratio": "catalogue" if not estimated else
                          f"configured {a.spot_price_ratio} where the catalogue has none",
            "interruptions": "the type's band (finance's, else the published one, else "
                             f"{a.default_band}) per month / 730 node-hours",
            "overlap": "on a cluster where the team has idle-allocation advice, that advice "
                       "overlaps this saving by its idle share (overlap_with; the headline counts "
                       "it once); a commitment sized on demand with these runs in it would cover "
                       "less once they move (not netted)",
        },
        evidence={"runs": len(runs), "paid_on_demand": str(cents(paid)),
                  "rework_gpu_hours": str(rework.quantize(TENTH)), "top_runs": top,
                  "savings_by_cluster": _by_cluster(runs)},
    )  # fmt: skip


def _by_cluster(runs: list[_SpotRun]) -> dict[str, str]:
    """The saving of the runs on each cluster (recommendation_overlaps reads it)."""
    by: dict[str, Decimal] = defaultdict(Decimal)
    for r in runs:
        by[r.run.cluster] += r.paid - r.spot
    return {cluster: str(cents(amount)) for cluster, amount in sorted(by.items())}


# --- idle --------------------------------------------------------------------------------------


def idle_drafts(
    *,
    supply: Mapping[tuple[str, str, str, str], demand.Curve],
    curves: Mapping[DemandKey, demand.Curve],
    sums: Mapping[tuple[Any, ...], Money],
    nodes: Mapping[str, NodeInfo],
    a: Assumptions,
    window: Window,
) -> list[Draft]:
    gpus = {info.pool: info.gpus for info in nodes.values()}
    in_use: dict[tuple[str, str, str, str], demand.Curve] = {}
    for (_, *pool), curve in curves.items():
        key = (pool[0], pool[1], pool[2], pool[3])
        month_part = curve[-window.month_hours :]
        in_use[key] = in_use[key] + month_part if key in in_use else month_part.copy()
    drafts = []
    for (pool, _, currency, part), total in sums.items():
        if part != "all" or pool[3] not in ("on_demand", "spot") or pool not in supply:
            continue
        draft = _idle(pool, currency, total, supply[pool], in_use, gpus, sums, a, window)
        if draft is not None:
            drafts.append(draft)
    return drafts


def _idle(
    pool: tuple[str, str, str, str],
    currency: str,
    total: Money,
    up: demand.Curve,
    in_use: Mapping[tuple[str, str, str, str], demand.Curve],
    gpus: Mapping[tuple[str, str, str, str], int],
    sums: Mapping[tuple[Any, ...], Money],
    a: Assumptions,
    window: Window,
) -> Draft | None:
    provider, instance_type, region, mix = pool
    used = in_use.get(pool, np.zeros(len(up)))
    up_hours = up > 0.5
    if not up_hours.any() or total.paid <= 0:
        return None
    needed = np.ceil(used[up_hours] / max(gpus.get(pool, 8), 1) - 1e-6)
    spare = np.floor(up[up_hours] + 1e-6) - needed
    # Spare in (100 - P) % of the billed hours: the P-th percentile of the spare nodes.
    release = math.floor(demand.percentile_level(spare, a.recommendation_percentile))
    if release < 1:
        return None
    node_hours = as_decimal(float(up.sum()))
    per_node_hour = total.paid / node_hours
    savings = cents(release * per_node_hour * HOURS_PER_MONTH)
    bearers = {
        team: money.paid
        for (p, team, cur, part), money in sums.items()
        if p == pool and cur == currency and part == "idle"
    }
    idle_paid = sum(bearers.values(), Decimal(0))
    share = idle_paid / total.paid
    team_id = max(bearers, key=lambda t: (bearers[t], str(t))) if bearers else None
    name = f"{provider} {instance_type} {region} ({mix.replace('_', '-')})"
    action = (
        f"Pool {name} was idle {share * 100:.0f} % of the month: release {release} node"
        f"{'s' if release > 1 else ''} (at least {release} stood idle in "
        f"{100 - a.recommendation_percentile} % of its billed hours), saves "
        f"{money_text(savings, currency)} a month."
    )
    return Draft(
        team_id=team_id, kind="idle", key=":".join(pool),
        title=f"Release {release} idle {instance_type} node{'s' if release > 1 else ''}",
        action=action, monthly_savings=savings, currency=currency,
        confidence="medium" if mix == "on_demand" else "low",
        assumptions={
            "cost_per_node_hour": str(per_node_hour.quantize(Decimal("0.0001"))),
            "hours_per_month": str(HOURS_PER_MONTH),
            "spare_nodes_percentile": 100 - a.recommendation_percentile,
        },
        evidence={
            "idle_share": str(share.quantize(Decimal("0.0001"))),
            "idle_cost": str(cents(idle_paid)), "pool_cost": str(cents(total.paid)),
            "node_hours": str(node_hours.quantize(TENTH)),
            "mean_nodes_billed": f"{float(up[up_hours].mean()):.1f}",
            "mean_gpus_in_use": f"{float(used[up_hours].mean()):.1f}",
            "month": month_format(window.month),
        },
    )  # fmt: skip


# --- rightsize ---------------------------------------------------------------------------------


def rightsize_drafts(
    *,
    utilisation: Mapping[tuple[int | None, str], tuple[Decimal, Decimal]],
    endpoints: Mapping[tuple[int | None, str, str], Mapping[tuple[str, str, str, str], Money]],
    gpus: Mapping[str, int],
    quotes: Quotes,
    window: Window,
) -> list[Draft]:
    drafts = []
    for (team_id, currency, endpoint), by_pool in endpoints.items():
        measured = utilisation.get((team_id, endpoint))
        if measured is None or measured[0] > RIGHTSIZE_UTILISATION or not by_pool:
            continue
        pool = max(by_pool, key=lambda p: (by_pool[p].paid, p))
        provider, instance_type, region, _ = pool
        smaller = SMALLER_TYPES.get(provider_key(provider))
        current = quotes.get((provider, instance_type, region))
        candidate = quotes.get((provider, smaller or "", region))
        if not smaller or current is None or candidate is None:
            continue
        if current.on_demand is None or candidate.on_demand is None:
            continue
        now = current.on_demand / gpus.get(instance_type, 8)
        then = candidate.on_demand / gpus.get(smaller, 1)
        paid = sum((m.paid for m in by_pool.values()), Decimal(0))
        savings = cents(paid * (1 - then / now))
        if savings <= 0:
            continue
        util = measured[0]
        drafts.append(Draft(
            team_id=team_id, kind="rightsize", key=f"endpoint:{endpoint}",
            title=f"Serve {endpoint} from {smaller}",
            action=(
                f"Endpoint {endpoint} uses {util * 100:.0f} % of its {instance_type} GPUs "
                f"(measured utilisation): a smaller GPU type, {smaller}, serves it for "
                f"{money_text(savings, currency)} less a month."
            ),
            monthly_savings=savings, currency=currency, confidence="low",
            assumptions={
                "threshold": str(RIGHTSIZE_UTILISATION), "same_gpu_count": True,
                "gpu_hour_now": str(now.quantize(Decimal("0.0001"))),
                "gpu_hour_smaller": str(then.quantize(Decimal("0.0001"))),
                "note": "the smaller GPU's lower throughput fits in the measured headroom; "
                        "check memory (the model must fit) before moving",
                "overlap": "the endpoint's pods are in no idle-allocation recommendation (one "
                           "saving per cost); a commitment sized on demand with these pods in "
                           "it would cover less once they move (not netted)",
            },
            evidence={"utilisation": str(util.quantize(Decimal("0.0001"))),
                      "gpu_hours_measured": str(measured[1].quantize(TENTH)),
                      "cost": str(cents(paid)), "month": month_format(window.month)},
        ))  # fmt: skip
    return drafts
