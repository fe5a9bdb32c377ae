"""Reads of a month's ledger against its bill: the figures the `attribute` command prints
after a run (totals per category, and the conservation check per provider and account), named
as finance names them: amortised cost (EffectiveCost, what the ledger splits) and invoiced cost
(BilledCost).

MoneySum is exact on both databases (a Decimal aggregate on SQLite, numeric SUM on PostgreSQL).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from billing_ingest.models import CostLineItem
from finops.attribution.models import AllocatedCost, AttributionRun
from finops.core.money import MoneySum


def _exact_sums(queryset: Any, keys: tuple[str, ...], value: str) -> dict[tuple[Any, ...], Decimal]:
    rows = queryset.values_list(*keys).annotate(total=MoneySum(value)).order_by()
    return {tuple(key): total or Decimal(0) for *key, total in rows}


def month_category_totals(*, month: dt.date) -> dict[tuple[str, str], Decimal]:
    """(currency, category) -> allocated amount for the month."""
    sums = _exact_sums(
        AllocatedCost.objects.filter(billing_period=month.replace(day=1)),
        ("billing_currency", "category"),
        "amount",
    )
    return dict(sorted(sums.items()))  # type: ignore[arg-type]


def month_conservation(*, month: dt.date) -> dict[tuple[str, str, str], dict[str, Decimal]]:
    """(provider, billing account, currency) -> amortised (sum of EffectiveCost of the month's
    succeeded line items: what attribution splits), allocated (sum of the ledger), difference
    (allocated - amortised) and invoiced (sum of BilledCost, beside it: it is not split, so it
    need not equal the ledger)."""
    month = month.replace(day=1)
    keys = ("provider_name", "billing_account_id", "billing_currency")
    items = CostLineItem.objects.settled().filter(billing_period=month)
    amortised = _exact_sums(items, keys, "effective_cost")
    invoiced = _exact_sums(items, keys, "billed_cost")
    allocated = _exact_sums(AllocatedCost.objects.filter(billing_period=month), keys, "amount")
    zero = Decimal(0)
    result: dict[tuple[str, str, str], dict[str, Decimal]] = {}
    for key in sorted(set(amortised) | set(allocated)):
        a, b = allocated.get(key, zero), amortised.get(key, zero)
        result[key] = {  # type: ignore[index]
            "amortised": b,
            "allocated": a,
            "difference": a - b,
            "invoiced": invoiced.get(key, zero),
        }
    return result


def attribution_run_latest(*, month: dt.date) -> AttributionRun | None:
    """The month's latest succeeded attribution run (its phases: where its time went)."""
    return (
        AttributionRun.objects.filter(billing_period=month, status=AttributionRun.Status.SUCCEEDED)
        .order_by("-finished_at", "-id")
        .first()
    )
