"""Reads: commitments from the bills (utilisation, coverage) (issue 13). How much to commit is
a recommendation (finops.pricing.recommendation_commits, issue 27).

- Utilisation per commitment and month: used = EffectiveCost of rows whose
  CommitmentDiscountStatus is `Used` (the commitment's cost amortised onto covered usage: FOCUS,
  AWS RI / savings plan columns as the CUR parser maps them, Azure reservations), unused = rows
  whose status is `Unused` (FOCUS, Azure UnusedReservation / UnusedSavingsPlan rows). Unused
  cost reaches teams through the idle policy like any other line.
- Coverage: the share of a scope's GPU-hours bought under a commitment (ledger rows with
  pricing mix `commitment`).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q

from billing_ingest.models import CostLineItem
from finops.attribution.inputs.list_cost import COMMITMENT
from finops.attribution.models import AllocatedCost
from finops.core.money import MoneySum, exact_sum

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
    sums = dict(
        rows.values_list("pricing_mix")
        .annotate(s=exact_sum("gpu_seconds", decimal_places=6))
        .order_by()
    )
    total = sum((v for v in sums.values() if v), _ZERO)
    return (sums.get(COMMITMENT) or _ZERO) / total if total else None
