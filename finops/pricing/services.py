"""Writes: catalogue price tiers into SkuPrice, refreshed instance prices into InstancePrice,
the month's usage per team and instance type (TeamTypeUsage, read by the pricing page), and the
pricing assumptions (checked by the model's validation, for the form and the API)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from finops.attribution.inputs.catalogue import normalise_instance_type
from finops.audit.services import audit_record
from finops.pricing.catalogues import Figure
from finops.pricing.comparisons import gpu_jobs_and_idle, gpu_rows, newest_attribution, usage_sums
from finops.pricing.gcp_catalog import PriceTier
from finops.pricing.models import (
    PRICE_QUANTUM,
    InstancePrice,
    PricingAssumptions,
    SkuPrice,
    TeamTypeUsage,
    TeamUsageMonth,
)

# The settings a person may change (the form's and the API's keys).
ASSUMPTION_FIELDS = tuple(
    field.name
    for field in PricingAssumptions._meta.concrete_fields
    if field.editable and not field.primary_key
)


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


def instance_prices_store(*, figures: Iterable[Figure], fetched_at: datetime) -> int:
    """One row per (provider, instance type, region, kind): a refresh replaces the figure.

    One transaction: a refresh is stored whole or not at all. Two figures of one key in one
    read (e.g. two AWS offers of the same term) keep the lower: the price one can buy at."""
    best: dict[tuple[str, str, str, str], Figure] = {}
    for figure in figures:
        key = (
            figure.provider,
            normalise_instance_type(figure.instance_type),
            figure.region,
            figure.kind,
        )
        if key not in best or figure.hourly < best[key].hourly:
            best[key] = figure
    rows = [
        InstancePrice(
            provider=provider,
            instance_type=instance_type,
            region=region,
            kind=kind,
            hourly=figure.hourly.quantize(PRICE_QUANTUM, rounding=ROUND_HALF_EVEN),
            currency=figure.currency,
            source=figure.source,
            source_ref=figure.source_ref[:300],
            effective_date=figure.effective_date,
            fetched_at=fetched_at,
        )
        for (provider, instance_type, region, kind), figure in sorted(best.items())
    ]
    with transaction.atomic():
        InstancePrice.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["provider", "instance_type", "region", "kind"],
            update_fields=["hourly", "currency", "source", "source_ref", "effective_date",
                           "fetched_at"],
        )  # fmt: skip
    return len(rows)


def gcp_prices_store(
    *, tiers: Iterable[PriceTier], figures: Iterable[Figure], fetched_at: datetime
) -> tuple[int, int]:
    """A GCP catalogue read: its SKU tiers and the machine prices composed from them, stored
    together or not at all (so a machine price never outlives the SKU prices it was made of).
    Returns (tiers stored, machine prices stored)."""
    with transaction.atomic():
        tier_count = sku_prices_store(provider="gcp", tiers=tiers, fetched_at=fetched_at)
        figure_count = instance_prices_store(figures=figures, fetched_at=fetched_at)
    return tier_count, figure_count


def pricing_assumptions_check(
    *, values: Mapping[str, Any], instance: PricingAssumptions | None = None
) -> PricingAssumptions:
    """The assumptions with `values` applied (unsaved), after the model's validation; raise
    ValidationError({setting: [messages]}) naming each refused setting. Absent keys keep the
    stored values."""
    unknown = sorted(set(values) - set(ASSUMPTION_FIELDS))
    if unknown:
        raise ValidationError({name: ["Not a pricing setting."] for name in unknown})
    row = instance if instance is not None else PricingAssumptions.current()
    for name, value in values.items():
        # A JSON number 1.2 is the decimal 1.2, not the float's binary expansion.
        setattr(row, name, Decimal(repr(value)) if isinstance(value, float) else value)
    row.full_clean(validate_unique=False, validate_constraints=False)
    return row


def pricing_assumptions_update(
    *, user: AbstractBaseUser | AnonymousUser, values: Mapping[str, Any]
) -> PricingAssumptions:
    """Check and store the assumptions (one row), with an audit event of what changed."""
    with transaction.atomic():
        PricingAssumptions.current()
        row = PricingAssumptions.objects.select_for_update().get(pk=1)
        before = {name: getattr(row, name) for name in ASSUMPTION_FIELDS}
        row = pricing_assumptions_check(values=values, instance=row)
        row.save()
        changes = {
            name: [str(before[name]), str(getattr(row, name))]
            for name in ASSUMPTION_FIELDS
            if before[name] != getattr(row, name)
        }
        audit_record(
            actor=user, action="pricing_assumptions.update", obj_repr=str(row), details=changes
        )
    row.refresh_from_db()
    return row


def team_usage_store(*, month: date) -> int:
    """Store the month's GPU usage per team, currency and instance type (TeamTypeUsage) with the
    attribution it sums and the GPU cost of jobs and idle (the measured cluster utilisation),
    replacing what was stored; returns the rows stored. Nothing when the month was never
    attributed."""
    attributed_at = newest_attribution(month=month)
    if attributed_at is None:
        return 0
    grouped = usage_sums(month, gpu_rows(month), ("team_id", "billing_currency"))
    rows = [
        TeamTypeUsage(
            billing_period=month, team_id=team_id, currency=currency, provider=provider,
            instance_type=instance_type, region=region, listed=listed, gpu_seconds=seconds,
            unpriced=unpriced,
        )
        for (team_id, currency), by_type in grouped.items()
        for (provider, instance_type, region), (listed, seconds, unpriced) in by_type.items()
    ]  # fmt: skip
    jobs, idle = gpu_jobs_and_idle(month=month)
    with transaction.atomic():
        TeamTypeUsage.objects.filter(billing_period=month).delete()
        TeamTypeUsage.objects.bulk_create(rows)
        TeamUsageMonth.objects.update_or_create(
            billing_period=month,
            defaults={
                "attributed_at": attributed_at, "stored_at": timezone.now(),
                "gpu_jobs_cost": jobs, "gpu_idle_cost": idle,
            },
        )  # fmt: skip
    return len(rows)
