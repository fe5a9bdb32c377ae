"""The attribution ledger and its rollups.

AllocatedCost is the ledger: for a billing month, every line item's EffectiveCost is split into
rows whose amounts sum to it exactly. Rows are aggregated per day and dimension (not per
line item x hour) to keep the ledger small; rounding happens per line item before aggregation,
so sums stay exact.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models.functions import Cast

from billing_ingest.models import ImportBatch, JobRecord, money_field
from finops.org.models import Team


class Category(models.TextChoices):
    TRAINING = "training"
    INFERENCE = "inference"
    TAGGED = "tagged"
    SHARED = "shared"
    IDLE = "idle"
    UNALLOCATED = "unallocated"


class AllocatedCost(models.Model):
    billing_period = models.DateField(db_index=True)
    day = models.DateField()
    category = models.CharField(max_length=16, choices=Category.choices)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT)
    job = models.ForeignKey(JobRecord, null=True, blank=True, on_delete=models.SET_NULL)
    run_id = models.CharField(max_length=500, blank=True)
    # The compute node (billed resource name) for GPU costs, including idle.
    node = models.CharField(max_length=1000, blank=True)
    provider_name = models.CharField(max_length=100, blank=True)
    billing_account_id = models.CharField(max_length=200, blank=True)
    sub_account_id = models.CharField(max_length=200, blank=True)
    service_name = models.CharField(max_length=200, blank=True)
    pricing_category = models.CharField(max_length=32, blank=True)
    billing_currency = models.CharField(max_length=3)
    amount = money_field()
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=Decimal(0))
    source_batch = models.ForeignKey(ImportBatch, null=True, on_delete=models.SET_NULL)

    class Meta:
        indexes = [
            models.Index(fields=["billing_period", "category"]),
            models.Index(fields=["billing_period", "team"]),
            models.Index(fields=["billing_period", "run_id"]),
        ]

    def __str__(self) -> str:
        owner = self.team.slug if self.team_id and self.team else "-"
        return f"{self.day} {self.category} {owner} {self.amount} {self.billing_currency}"


class RunCost(models.Model):
    billing_period = models.DateField(db_index=True)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT)
    run_id = models.CharField(max_length=500)
    cluster = models.CharField(max_length=100, blank=True)
    cost = money_field()
    # Cost of attempts that failed or were preempted (wasted work).
    wasted_cost = money_field(default=Decimal(0))
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=Decimal(0))
    jobs = models.PositiveIntegerField(default=0)
    failed_jobs = models.PositiveIntegerField(default=0)
    running_jobs = models.PositiveIntegerField(default=0)
    first_start = models.DateTimeField(null=True, blank=True)
    last_end = models.DateTimeField(null=True, blank=True)
    billing_currency = models.CharField(max_length=3)

    class Meta:
        # Cast: on SQLite money is stored as text, and text sorts "9" above "10".
        ordering = [Cast("cost", output_field=models.FloatField()).desc()]
        constraints = [
            models.UniqueConstraint(
                fields=["billing_period", "team", "run_id", "cluster", "billing_currency"],
                name="unique_run_cost",
            )
        ]

    def __str__(self) -> str:
        return f"{self.run_id} {self.billing_period:%Y-%m} {self.cost} {self.billing_currency}"

    @property
    def gpu_hours(self) -> Decimal:
        return self.gpu_seconds / Decimal(3600)

    @property
    def cost_per_gpu_hour(self) -> Decimal | None:
        hours = self.gpu_hours
        return (self.cost / hours) if hours else None


class TeamDailyCost(models.Model):
    billing_period = models.DateField(db_index=True)
    day = models.DateField()
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT)
    category = models.CharField(max_length=16, choices=Category.choices)
    provider_name = models.CharField(max_length=100, blank=True)
    billing_currency = models.CharField(max_length=3)
    amount = money_field()
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=Decimal(0))

    class Meta:
        indexes = [models.Index(fields=["billing_period", "team", "day"])]

    def __str__(self) -> str:
        return f"{self.day} {self.category} {self.amount} {self.billing_currency}"


class AttributionRun(models.Model):
    """One execution of `attribute --month`: its status is the progress watermark."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    billing_period = models.DateField(db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    line_items = models.PositiveIntegerField(default=0)
    jobs = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"attribution {self.billing_period:%Y-%m} ({self.status})"
