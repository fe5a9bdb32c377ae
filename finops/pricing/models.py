"""Models: see the app docstring."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from billing_ingest.money import MoneyField

# units + nanos/10^9 needs 9 decimals; units is an int64 (19 digits).
PRICE_DIGITS = 28
PRICE_PLACES = 9
PRICE_QUANTUM = Decimal(1).scaleb(-PRICE_PLACES)


class UsageType(models.TextChoices):
    """GCP Cloud Catalog category.usageType values."""

    ON_DEMAND = "OnDemand"
    PREEMPTIBLE = "Preemptible"
    COMMIT_1YR = "Commit1Yr"
    COMMIT_3YR = "Commit3Yr"


class SkuPrice(models.Model):
    """One price tier of one catalogue SKU as of its effective time.

    A SKU's price at a later effective time is a new row, so earlier prices stay comparable;
    a catalogue re-read at the same effective time updates the row in place."""

    provider = models.CharField(max_length=32, help_text="gcp")
    service_id = models.CharField(max_length=64, help_text="e.g. 6F81-5844-456A (Compute Engine)")
    sku_id = models.CharField(max_length=64)
    description = models.CharField(max_length=500)
    resource_family = models.CharField(max_length=100, blank=True)
    resource_group = models.CharField(max_length=100, blank=True, help_text="GPU, CPU, RAM ...")
    usage_type = models.CharField(max_length=32, help_text="OnDemand, Preemptible, Commit1Yr ...")
    gpu_model = models.CharField(
        max_length=50, blank=True, help_text="from a GPU SKU's description, e.g. A100-80GB"
    )
    regions = models.JSONField(default=list, blank=True, help_text="service regions")
    usage_unit = models.CharField(max_length=50, help_text="h, GiBy.h, ...")
    tier_start = models.DecimalField(
        max_digits=28, decimal_places=9, default=Decimal(0), help_text="startUsageAmount"
    )
    unit_price = MoneyField(max_digits=PRICE_DIGITS, decimal_places=PRICE_PLACES)
    currency = models.CharField(max_length=3)
    effective_time = models.DateTimeField()
    fetched_at = models.DateTimeField()

    class Meta:
        ordering = ["provider", "sku_id", "tier_start", "-effective_time"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "sku_id", "tier_start", "effective_time"],
                name="skuprice_unique_tier_at_time",
            ),
        ]
        indexes = [models.Index(fields=["provider", "resource_group", "usage_type", "gpu_model"])]

    def __str__(self) -> str:
        return f"{self.provider} {self.sku_id} {self.unit_price} {self.currency}/{self.usage_unit}"
