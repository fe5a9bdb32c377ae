"""Writes: catalogue price tiers into SkuPrice."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction

from finops.pricing.gcp_catalog import PriceTier
from finops.pricing.models import SkuPrice


def sku_prices_store(*, provider: str, tiers: Iterable[PriceTier], fetched_at: datetime) -> int:
    """Insert or update one row per (provider, SKU, tier, effective time); returns the count.

    One transaction: a catalogue read is stored whole or not at all. Re-reading the same
    catalogue updates rows in place (fetched_at moves), so loading twice adds nothing."""
    rows = [
        SkuPrice(
            provider=provider,
            service_id=tier.service_id,
            sku_id=tier.sku_id,
            description=tier.description,
            resource_family=tier.resource_family,
            resource_group=tier.resource_group,
            usage_type=tier.usage_type,
            gpu_model=tier.gpu_model,
            regions=list(tier.regions),
            usage_unit=tier.usage_unit,
            tier_start=tier.tier_start,
            unit_price=tier.unit_price,
            currency=tier.currency,
            effective_time=tier.effective_time,
            fetched_at=fetched_at,
        )
        for tier in tiers
    ]
    updated = [
        "service_id",
        "description",
        "resource_family",
        "resource_group",
        "usage_type",
        "gpu_model",
        "regions",
        "usage_unit",
        "unit_price",
        "currency",
        "fetched_at",
    ]
    with transaction.atomic():
        SkuPrice.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["provider", "sku_id", "tier_start", "effective_time"],
            update_fields=updated,
            batch_size=500,
        )
    return len(rows)
