"""Reads: commitments from the bills (utilisation, coverage) and how much to commit (issue 13).

- Utilisation per commitment and month: used = EffectiveCost of rows whose
  CommitmentDiscountStatus is `Used` (the commitment's cost amortised onto covered usage: FOCUS,
  AWS RI / savings plan columns as the CUR parser maps them, Azure reservations), unused = rows
  whose status is `Unused` (FOCUS, Azure UnusedReservation / UnusedSavingsPlan rows). Unused
  cost reaches teams through the idle policy like any other line.
- Coverage: the share of a scope's GPU-hours bought under a commitment (ledger rows with
  pricing mix `commitment`).
- Recommendation: GPUs in use per hour over the last 30, 60 and 90 days (from the jobs the team's
  ledger rows name); committing to a low percentile keeps the commitment busy almost every
  hour. Savings per month = level x 730 h x on-demand price per GPU-hour x (1 - committed
  ratio); payback (all upfront) = upfront payment / monthly savings. A window longer than the
  team's history (since its first job) gets no level: its hours before that job would count
  as 0 GPUs and pull the percentile to 0, so it says how many days there are instead.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Min, Q, Sum

from billing_ingest.models import CostLineItem, JobRecord
from billing_ingest.money import MoneySum
from finops.attribution.list_cost import COMMITMENT
from finops.attribution.models import AllocatedCost
from finops.pricing.comparison import HOURS_PER_MONTH, Assumptions, money, ratio

_ZERO = Decimal(0)
WINDOWS = (30, 60, 90)


@dataclass(frozen=True)
class CommitmentMonth:
    commitment_id: str
    commitment_type: str
    currency: str
    used: Decimal
    unused: Decimal

    @property
    def utilisation(self) -> Decimal | None:
        total = self.used + self.unused
        return self.used / total if total else None


def commitment_utilisation(*, month: dt.date) -> list[CommitmentMonth]:
    rows = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .exclude(commitment_discount_id="")
        .values_list(
            "commitment_discount_id",
            "commitment_discount_type",
            "billing_currency",
            "commitment_discount_status",
        )
        .annotate(s=MoneySum("effective_cost"))
        .order_by()
    )
    acc: dict[tuple[str, str, str], list[Decimal]] = defaultdict(lambda: [_ZERO, _ZERO])
    for commitment_id, kind, currency, status, total in rows:
        column = 1 if status.strip().lower() == "unused" else 0
        acc[(commitment_id, kind, currency)][column] += total or _ZERO
    return [
        CommitmentMonth(cid, kind, currency, used, unused)
        for (cid, kind, currency), (used, unused) in sorted(acc.items())
    ]


def coverage(*, month: dt.date, team_id: int | None) -> Decimal | None:
    """Share of the team's GPU-hours of the month under a commitment."""
    rows = AllocatedCost.objects.filter(Q(team_id=team_id), billing_period=month, job__isnull=False)
    sums = dict(rows.values_list("pricing_mix").annotate(s=Sum("gpu_seconds")).order_by())
    total = sum((v for v in sums.values() if v), _ZERO)
    return (sums.get(COMMITMENT) or _ZERO) / total if total else None


def demand_curve(*, team_id: int | None, until: dt.datetime, days: int) -> list[Decimal]:
    """GPUs in use in each hour of the window ending at `until` (a 0 for idle hours), from
    the jobs attributed to the team."""
    since = until - dt.timedelta(days=days)
    job_ids = (
        AllocatedCost.objects.filter(Q(team_id=team_id), job__isnull=False, day__gte=since.date())
        .values("job_id")
        .distinct()
    )
    jobs = JobRecord.objects.filter(pk__in=job_ids, start__lt=until).filter(
        Q(end__isnull=True) | Q(end__gt=since)
    )
    hours = days * 24
    start_s = since.timestamp()
    curve = [_ZERO] * hours
    for start, end, gpus in jobs.values_list("start", "end", "gpus"):
        if start is None:
            continue
        a = max(start, since).timestamp()
        b = min(end or until, until).timestamp()
        for hour in range(int((a - start_s) // 3600), min(hours, math.ceil((b - start_s) / 3600))):
            h0 = start_s + hour * 3600
            overlap = min(b, h0 + 3600) - max(a, h0)
            if overlap > 0:
                curve[hour] += Decimal(gpus) * Decimal(overlap) / 3600
    return curve


def percentile(values: list[Decimal], pct: int) -> Decimal:
    """Nearest-rank percentile (0 for no values); pct is held to 1..100."""
    if not values:
        return _ZERO
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(pct / 100 * len(ordered))))
    return ordered[rank - 1]


def demand_history_start(*, team_id: int | None, until: dt.datetime) -> dt.datetime | None:
    """The start of the first job attributed to the team before `until`: its demand history
    begins there (None: no job at all)."""
    job_ids = AllocatedCost.objects.filter(Q(team_id=team_id), job__isnull=False).values("job_id")
    first: dt.datetime | None = JobRecord.objects.filter(pk__in=job_ids, start__lt=until).aggregate(
        first=Min("start")
    )["first"]
    return first


def _level(
    window: list[Decimal], pct: int, on_demand_gpu_hour: Decimal | None, assumptions: Assumptions
) -> dict[str, Any]:
    level = percentile(window, pct).quantize(Decimal("0.01"))
    entry: dict[str, Any] = {"gpus": str(level)}
    if on_demand_gpu_hour:
        for term in ("1y", "3y"):
            r = assumptions.reserved_ratios.get(f"{term}_all_upfront", Decimal(1))
            monthly = level * HOURS_PER_MONTH * on_demand_gpu_hour * (1 - r)
            months = 12 if term == "1y" else 36
            upfront = level * HOURS_PER_MONTH * months * on_demand_gpu_hour * r
            entry[f"savings_per_month_{term}"] = money(monthly)
            entry[f"payback_months_{term}"] = ratio(upfront / monthly) if monthly else None
    return entry


def recommendation(
    *,
    team_id: int | None,
    until: dt.datetime,
    on_demand_gpu_hour: Decimal | None,
    assumptions: Assumptions,
) -> dict[str, Any]:
    """Commitment level per window, its savings and payback; the 90-day curve to draw. A
    window the history does not fill has `gpus` None and no savings, only `history_days`."""
    pct = assumptions.recommendation_percentile
    curve = demand_curve(team_id=team_id, until=until, days=max(WINDOWS))
    first = demand_history_start(team_id=team_id, until=until)
    history_days = (until - first).days if first is not None else 0
    levels = []
    for days in WINDOWS:
        if first is None or first > until - dt.timedelta(days=days):
            levels.append({"days": days, "gpus": None, "history_days": history_days})
            continue
        entry = _level(curve[-days * 24 :], pct, on_demand_gpu_hour, assumptions)
        levels.append({"days": days, **entry})
    return {
        "percentile": pct,
        "history_days": history_days,
        "levels": levels,
        "on_demand_gpu_hour": money(on_demand_gpu_hour) if on_demand_gpu_hour else None,
        "curve_start": (until - dt.timedelta(days=max(WINDOWS))).isoformat(),
        "curve": [str(v.quantize(Decimal("0.01"))) for v in curve],
    }
