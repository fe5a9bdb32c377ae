"""Commitment recommendations (issue 27): how much of a team's on-demand use to commit. Pure.

Demand is the team's use of on-demand nodes per hour over the longest of the last 90/60/30 days
its history fills. The level is the P-th percentile (setting, default P10) of it, so the
commitment is busy in (100 - P) % of the hours. For each term:

    savings a month = 730 x (mean over the hours of min(demand, level) x paid per unit
                             - level x list per unit x committed ratio)
    break-even      = months of the term the covered use must last to pay for all of it
                    = term months x level x list x ratio / (mean covered x paid)

`paid` is the team's EffectiveCost per unit on those nodes (a contract rate below list, or a
GCP committed-use credit, counts: use already discounted saves little more), `list` its
ListCost per unit, the ratio the catalogue's term price / on demand, else the configured ratio
(a lower confidence, said in the assumptions).

- GCP, CoreWeave and others: per (provider, type, region); the unit is a GPU (to a tenth:
  GCP commits GPUs, CoreWeave reserves capacity), "commit N x TYPE GPUs".
- Demand is the GPUs the nodes held (finops.pricing.recommendation_inputs.held_and_requested:
  on each node at most its GPUs) and a GPU-hour is priced over them; the level is at most the
  pool's GPUs (a savings plan: the fleet's, in list units an hour), and the action says so when
  the jobs asked for more (overlapping jobs, jobs whose end was never reported).
- AWS and Azure: one savings plan per provider covering every type; the unit is a currency
  unit of on-demand use an hour (to a whole unit), so the commitment paid is level x ratio an
  hour; the ratio is the types' committed ratios weighted by their list cost (the catalogue
  holds reserved-instance terms: a savings plan prices close to them).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from typing import Any

import numpy as np

from finops.core.months import month_format
from finops.pricing import demand
from finops.pricing.comparison import HOURS_PER_MONTH, Assumptions
from finops.pricing.prices import PriceQuote, provider_key
from finops.pricing.recommendation_inputs import DemandKey, Money, RateKey, Window
from finops.pricing.recommendation_rules import (
    TENTH,
    Draft,
    Quotes,
    as_decimal,
    cents,
    lower_confidence,
    money_text,
)

WINDOWS = (90, 60, 30)
TERMS = ("1y_no_upfront", "1y_all_upfront", "3y_no_upfront", "3y_all_upfront")
SAVINGS_PLAN_PROVIDERS = {"aws": "AWS Savings Plan", "azure": "Azure savings plan"}
ONE = Decimal(1)
Pool = tuple[str, str, str, str]  # provider, type, region, how bought


@dataclass(frozen=True)
class Sizes:
    """What the jobs asked for (GPUs an hour, before the nodes' limit) and each pool's GPUs."""

    requested: Mapping[DemandKey, demand.Curve]
    capacity: Mapping[Pool, int]


def _ratio(quote: PriceQuote | None, key: str, a: Assumptions) -> tuple[Decimal, bool]:
    """(committed / on-demand price, from the catalogue?)"""
    found = quote.ratio(key) if quote is not None else None
    if found is not None:
        return found, True
    return Decimal(a.reserved_ratios.get(key, 1)), False


def _terms(
    curve: demand.Curve, level: Decimal, paid: Decimal, listed: Decimal,
    ratios: Mapping[str, tuple[Decimal, bool]],
) -> tuple[Decimal, dict[str, Any]]:  # fmt: skip
    """(mean covered use, each term's ratio, source, monthly savings and break-even)."""
    covered = as_decimal(float(np.minimum(curve, float(level)).mean()))
    terms: dict[str, Any] = {}
    for key in TERMS:
        ratio, catalogue = ratios[key]
        committed = level * listed * ratio
        saving = (covered * paid - committed) * HOURS_PER_MONTH
        months = 12 if key.startswith("1y") else 36
        even = months * committed / (covered * paid) if covered and paid else None
        terms[key] = {
            "ratio": str(ratio.quantize(Decimal("0.0001"))),
            "source": "catalogue" if catalogue else "configured ratio (estimated)",
            "monthly_savings": str(cents(saving)),
            "break_even_months": str(even.quantize(TENTH)) if even is not None else None,
        }
    return covered, terms


def _days(first: dt.datetime | None, window: Window) -> int | None:
    if first is None:
        return None
    return next((d for d in WINDOWS if first <= window.until - dt.timedelta(days=d)), None)


def _confidence(days: int, catalogue: bool) -> str:
    level = {90: "high", 60: "medium"}.get(days, "low")
    return level if catalogue else lower_confidence(level)


def commit_drafts(
    *,
    curves: Mapping[DemandKey, demand.Curve],
    starts: Mapping[int | None, dt.datetime],
    rates: Mapping[RateKey, Money],
    quotes: Quotes,
    a: Assumptions,
    window: Window,
    requested: Mapping[DemandKey, demand.Curve] | None = None,
    capacity: Mapping[Pool, int] | None = None,
) -> list[Draft]:
    """requested: the GPUs the jobs asked for (curves: those the nodes held); capacity: each
    pool's GPUs. A commitment never exceeds the pool's (a savings plan the fleet's) capacity,
    and says so when the jobs asked for more."""
    sizes = Sizes(requested or {}, capacity or {})
    plans: dict[tuple[int | None, str, str], list[tuple[tuple[str, str, str], Money]]] = (
        defaultdict(list)
    )
    drafts = []
    for (team_id, currency, provider, instance_type, region, mix), money in rates.items():
        if mix != "on_demand" or money.gpu_hours <= 0 or money.listed <= 0 or money.paid <= 0:
            continue
        if (team_id, provider, instance_type, region, mix) not in curves:
            continue
        if provider_key(provider) in SAVINGS_PLAN_PROVIDERS:
            plans[(team_id, currency, provider)].append(((provider, instance_type, region), money))
            continue
        draft = _type_commit(team_id, currency, (provider, instance_type, region), money,
                             curves, starts, quotes, a, window, sizes)  # fmt: skip
        if draft is not None:
            drafts.append(draft)
    for (team_id, currency, provider), types in plans.items():
        draft = _plan_commit(
            team_id, currency, provider, types, curves, starts, quotes, a, window, sizes
        )
        if draft is not None:
            drafts.append(draft)
    return drafts


def _type_commit(
    team_id: int | None, currency: str, pool: tuple[str, str, str], money: Money,
    curves: Mapping[DemandKey, demand.Curve], starts: Mapping[int | None, dt.datetime],
    quotes: Quotes, a: Assumptions, window: Window, sizes: Sizes,
) -> Draft | None:  # fmt: skip
    provider, instance_type, region = pool
    days = _days(starts.get(team_id), window)
    if days is None:
        return None
    key = (team_id, provider, instance_type, region, "on_demand")
    curve = curves[key][-days * 24 :]
    pct = a.recommendation_percentile
    level = as_decimal(demand.percentile_level(curve, pct)).quantize(TENTH, rounding=ROUND_DOWN)
    limit = sizes.capacity.get((provider, instance_type, region, "on_demand"))
    if limit is not None:
        level = min(level, Decimal(limit))
    if level < TENTH:
        return None
    asked = sizes.requested.get(key)
    wanted = (
        as_decimal(demand.percentile_level(asked[-days * 24 :], pct)).quantize(TENTH, ROUND_DOWN)
        if asked is not None
        else level
    )
    quote = quotes.get(pool)
    ratios = {key: _ratio(quote, key, a) for key in TERMS}
    paid, listed = money.paid / money.gpu_hours, money.listed / money.gpu_hours
    covered, terms = _terms(curve, level, paid, listed, ratios)
    best = terms["1y_no_upfront"]
    savings = Decimal(best["monthly_savings"])
    if savings <= 0:
        return None
    action = (
        f"Commit {level} x {instance_type} GPUs ({provider}, {region}) for 1 year, no upfront: "
        f"saves {money_text(savings, currency)} a month at the P{pct} demand of the last "
        f"{days} days; break-even after {best['break_even_months']} months."
    )
    over = limit is not None and wanted > limit
    if over:
        action += (
            f" Its jobs asked for {wanted} GPUs at P{pct}, more than the pool's {limit} GPUs: "
            "the advice counts the GPUs the nodes could hold (overlapping jobs, or jobs whose "
            "end was never reported)."
        )
    return Draft(
        team_id=team_id, kind="commit", key=f"{provider}:{instance_type}:{region}",
        title=f"Commit {level} {instance_type} GPUs for 1 year", action=action,
        monthly_savings=savings, currency=currency,
        confidence=_confidence(days, ratios["1y_no_upfront"][1]),
        assumptions=_assumptions(pct, days, best, paid, listed, "GPU-hour"),
        evidence={
            "gpus": str(level), "gpus_requested": str(wanted),
            "pool_gpus": limit, "demand_exceeds_pool": over,
            "mean_gpus_in_use": f"{float(curve.mean()):.2f}",
            "mean_gpus_covered": f"{float(covered):.2f}", "hours": len(curve),
            "month": month_format(window.month), "terms": terms,
        },
    )  # fmt: skip


def _plan_commit(
    team_id: int | None, currency: str, provider: str,
    types: list[tuple[tuple[str, str, str], Money]],
    curves: Mapping[DemandKey, demand.Curve], starts: Mapping[int | None, dt.datetime],
    quotes: Quotes, a: Assumptions, window: Window, sizes: Sizes,
) -> Draft | None:  # fmt: skip
    days = _days(starts.get(team_id), window)
    if days is None:
        return None
    # Use in list currency units an hour: each type's GPUs x its list GPU-hour.
    curve = _in_money(curves, team_id, types, days)
    asked = _in_money(sizes.requested, team_id, types, days)
    pct = a.recommendation_percentile
    level = as_decimal(demand.percentile_level(curve, pct)).quantize(ONE, rounding=ROUND_DOWN)
    # The fleet's capacity in the same unit: each type's pool GPUs x its list GPU-hour.
    limits = [sizes.capacity.get((*pool, "on_demand")) for pool, _ in types]
    limit = (
        sum(
            (Decimal(n) * money.listed / money.gpu_hours
             for n, (_, money) in zip(limits, types, strict=True) if n is not None),
            Decimal(0),
        ).quantize(ONE, rounding=ROUND_DOWN)
        if all(n is not None for n in limits) and sizes.capacity
        else None
    )  # fmt: skip
    if limit is not None:
        level = min(level, limit)
    if level < ONE:
        return None
    wanted = (
        as_decimal(demand.percentile_level(asked, pct)).quantize(ONE, ROUND_DOWN)
        if sizes.requested
        else level
    )
    listed = sum((money.listed for _, money in types), Decimal(0))
    paid = sum((money.paid for _, money in types), Decimal(0)) / listed
    ratios = {}
    for key in TERMS:
        found = [(money.listed, _ratio(quotes.get(pool), key, a)) for pool, money in types]
        ratio = sum((weight * r for weight, (r, _) in found), Decimal(0)) / listed
        ratios[key] = (ratio, all(catalogue for _, (_, catalogue) in found))
    covered, terms = _terms(curve, level, paid, ONE, ratios)
    best = terms["1y_no_upfront"]
    savings = Decimal(best["monthly_savings"])
    if savings <= 0:
        return None
    hourly = cents(level * ratios["1y_no_upfront"][0])
    names = ", ".join(sorted({pool[1] for pool, _ in types}))
    plan = SAVINGS_PLAN_PROVIDERS[provider_key(provider)]
    action = (
        f"Commit {money_text(hourly, currency)} an hour to an {plan} for 1 year, no upfront "
        f"(it covers {money_text(level, currency)} an hour of on-demand {names}): saves "
        f"{money_text(savings, currency)} a month at the P{pct} demand of the last {days} days; "
        f"break-even after {best['break_even_months']} months."
    )
    over = limit is not None and wanted > limit
    if limit is not None and over:
        action += (
            f" Its jobs asked for {money_text(wanted, currency)} an hour of on-demand use at "
            f"P{pct}, more than the fleet's {money_text(limit, currency)} an hour: the advice "
            "counts the GPUs the nodes could hold."
        )
    return Draft(
        team_id=team_id, kind="commit", key=f"{provider}:savings-plan",
        title=f"{plan}: {money_text(hourly, currency)} an hour for 1 year", action=action,
        monthly_savings=savings, currency=currency,
        confidence=_confidence(days, ratios["1y_no_upfront"][1]),
        assumptions={
            **_assumptions(pct, days, best, paid, ONE, "currency unit of on-demand use"),
            "ratio_basis": "the types' committed ratios weighted by their list cost",
        },
        evidence={
            "commitment_per_hour": str(hourly), "covers_per_hour": str(level),
            "requested_per_hour": str(wanted),
            "fleet_per_hour": str(limit) if limit is not None else None,
            "demand_exceeds_fleet": over,
            "mean_use_per_hour": f"{float(curve.mean()):.2f}",
            "mean_covered_per_hour": f"{float(covered):.2f}", "types": names,
            "hours": len(curve), "month": month_format(window.month), "terms": terms,
        },
    )  # fmt: skip


def _in_money(
    curves: Mapping[DemandKey, demand.Curve], team_id: int | None,
    types: list[tuple[tuple[str, str, str], Money]], days: int,
) -> demand.Curve:  # fmt: skip
    """The team's GPUs on these types an hour, in list currency units an hour."""
    out = np.zeros(days * 24)
    for pool, money in types:
        found = curves.get((team_id, *pool, "on_demand"))
        if found is not None:
            out = out + found[-days * 24 :] * float(money.listed / money.gpu_hours)
    return out


def _assumptions(
    pct: int, days: int, best: Mapping[str, Any], paid: Decimal, listed: Decimal, unit: str
) -> dict[str, Any]:
    return {
        "percentile": pct, "window_days": days, "term": "1 year, no upfront",
        "committed_ratio": best["ratio"], "committed_ratio_source": best["source"],
        "unit": unit, "paid_per_unit": str(paid.quantize(Decimal("0.0001"))),
        "list_per_unit": str(listed.quantize(Decimal("0.0001"))),
        "prices_source": "the team's EffectiveCost and ListCost on these nodes this month; "
                         "committed = list x the committed ratio",
        "hours_per_month": str(HOURS_PER_MONTH),
    }  # fmt: skip


# --- why a team has no commitment advice --------------------------------------------------------


@dataclass(frozen=True)
class Note:
    """Why a team with GPU use has no advice of a kind (shown instead of nothing)."""

    team_id: int | None
    kind: str
    text: str


def commit_notes(
    *,
    curves: Mapping[DemandKey, demand.Curve],
    starts: Mapping[int | None, dt.datetime],
    drafts: list[Draft],
    a: Assumptions,
    window: Window,
) -> list[Note]:
    """For each team that held GPUs in the window but has no commit draft, why: too short a
    history, no steady use (its P-th percentile demand, over all its nodes, is under a tenth
    of a GPU), steady use only on nodes not bought on demand (spot, or already committed), or
    a price already at or below the committed one."""
    advised = {d.team_id for d in drafts if d.kind == "commit"}
    teams: dict[int | None, dict[str, demand.Curve]] = defaultdict(dict)
    for (team_id, *pool), curve in curves.items():
        mix = pool[3]
        found = teams[team_id].get(mix)
        teams[team_id][mix] = curve if found is None else found + curve
    pct = a.recommendation_percentile
    notes = []
    for team_id, by_mix in teams.items():
        if team_id in advised:
            continue
        days = _days(starts.get(team_id), window)
        if days is None:
            first = starts.get(team_id)
            since = f" (first job {first:%Y-%m-%d})" if first else ""
            notes.append(Note(team_id, "commit", (
                f"No commitment advice: under {WINDOWS[-1]} days of demand history{since}."
            )))  # fmt: skip
            continue
        hours = days * 24
        total = sum((c[-hours:] for c in by_mix.values()), np.zeros(hours))
        level = _level(total, pct)
        on_demand = by_mix.get("on_demand")
        steady = _level(on_demand[-hours:], pct) if on_demand is not None else Decimal(0)
        if level < TENTH:
            text = (
                f"No commitment advice: no steady use: P{pct} demand {_gpus(level)} GPUs over the "
                f"last {days} days (no GPU in use in at least {pct} % of the hours, mean "
                f"{float(total.mean()):.1f} GPUs); a commitment would stand idle."
            )
        elif steady < TENTH:
            bought = ", ".join(sorted(m.replace("_", "-") for m in by_mix if m != "on_demand"))
            text = (
                f"No commitment advice: its steady use (P{pct} demand {_gpus(level)} GPUs over the "
                f"last {days} days) runs on {bought} nodes, not on demand: nothing to commit."
            )
        else:
            text = (
                f"No commitment advice: committing its P{pct} on-demand demand "
                f"({_gpus(steady)} GPUs over the last {days} days) saves nothing at the price it "
                "already pays (a contract or discounted rate at or below the committed one)."
            )
        notes.append(Note(team_id, "commit", text))
    return notes


def _level(curve: demand.Curve, pct: int) -> Decimal:
    return as_decimal(demand.percentile_level(curve, pct)).quantize(TENTH, rounding=ROUND_DOWN)


def _gpus(level: Decimal) -> str:
    """GPUs to a tenth, a whole number without its ".0": 0 GPUs, 2.5 GPUs."""
    return str(level) if level % 1 else str(level.quantize(ONE))
