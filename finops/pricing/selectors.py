"""Reads: catalogue prices for pricing comparisons; the idle advice of teams."""

from __future__ import annotations

import datetime as dt

from django.db.models import FloatField, QuerySet
from django.db.models.functions import Cast

from finops.org.models import Team
from finops.pricing.models import Recommendation, SkuPrice

HOUR_UNITS = ("h",)


def gpu_hour_price(
    *,
    provider: str,
    usage_type: str,
    region: str,
    gpu_model: str | None = None,
    sku: str | None = None,
) -> SkuPrice | None:
    """The price of one GPU-hour (first tier) for a GPU model or SKU id, usage type and region.

    Among matching SKUs, the one listing the fewest regions wins (a regional SKU is more specific
    than a multi-regional one), then the newest effective time. None when nothing matches."""
    if (gpu_model is None) == (sku is None):
        raise ValueError("give exactly one of gpu_model or sku")
    prices = SkuPrice.objects.filter(
        provider=provider, usage_type=usage_type, usage_unit__in=HOUR_UNITS, tier_start=0
    )
    if sku is not None:
        prices = prices.filter(sku_id=sku)
    else:
        prices = prices.filter(resource_group="GPU", gpu_model__iexact=gpu_model)
    # Regions are a JSON list; JSON containment is not portable to SQLite, and the candidates
    # are a handful of rows, so the region is matched here.
    candidates = [price for price in prices if region in price.regions]
    if not candidates:
        return None
    return min(candidates, key=lambda p: (len(p.regions), -p.effective_time.timestamp()))


def idle_advice_of_teams(*, month: dt.date, teams: QuerySet[Team]) -> list[Recommendation]:
    """The month's open idle and rightsizing recommendations of these teams, largest saving
    first (what the idle showback tells a lead to do). Reads what the pricing step stored."""
    rows = Recommendation.objects.filter(
        billing_period=month,
        team__in=teams,
        kind__in=[Recommendation.Kind.IDLE, Recommendation.Kind.RIGHTSIZE],
        status=Recommendation.Status.OPEN,
    )
    return list(rows.order_by(Cast("monthly_savings", FloatField()).desc(), "kind", "key", "pk"))
