"""The attribution ledger and its rollups.

AllocatedCost is the ledger: for a billing month, every line item's EffectiveCost is split into
rows whose amounts sum to it exactly. Rows are aggregated per day and dimension (not per
line item x hour) to keep the ledger small; rounding happens per line item before aggregation,
so sums stay exact.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models
from django.db.models.functions import Cast

from billing_ingest.models import ImportBatch, JobRecord
from finops.attribution.engine.run_ids import run_cost_id
from finops.core.money import ExactDecimalField, money_field
from finops.core.months import month_format
from finops.org.models import Team


class Category(models.TextChoices):
    TRAINING = "training"
    INFERENCE = "inference"
    TAGGED = "tagged"
    SHARED = "shared"
    IDLE = "idle"
    UNALLOCATED = "unallocated"


class AllocatedCost(models.Model):
    # Not indexed alone: every composite index below starts with it.
    billing_period = models.DateField()
    day = models.DateField()
    category = models.CharField(max_length=16, choices=Category.choices)
    # The ledger is derived data, rebuilt whole for a month from the teams, jobs and batches
    # read in the same transaction, so the database need not check these references: on
    # PostgreSQL the deferred per-row checks (a locking lookup per ledger row and key) cost more
    # than writing the ledger itself (22 s at COMMIT for 6.9M rows), and a foreign key makes
    # swapping a month's partition lock the teams table (partitions.py). Django still applies
    # on_delete: PROTECT for a team with ledger rows, SET_NULL when a job or batch is deleted.
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.PROTECT, db_constraint=False
    )
    job = models.ForeignKey(
        JobRecord, null=True, blank=True, on_delete=models.SET_NULL, db_constraint=False
    )
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
    # How the amount was bought: on_demand, spot, commitment, other (list_cost.pricing_mix).
    pricing_mix = models.CharField(max_length=16, blank=True)
    # The on-demand equivalent, split exactly as amount is, and where it came from
    # (bill, catalogue, actual, purchase: see finops.attribution.inputs.list_cost).
    list_cost = money_field(default=Decimal(0))
    list_cost_source = models.CharField(max_length=16, blank=True)
    contracted_cost = money_field(default=Decimal(0))
    # Unindexed: read only through the month's rows; a batch is deleted rarely (admin), when one
    # scan to clear its references is cheaper than maintaining an index on every ledger write.
    source_batch = models.ForeignKey(
        ImportBatch, null=True, on_delete=models.SET_NULL, db_constraint=False, db_index=False
    )

    class Meta:
        indexes = [
            models.Index(fields=["billing_period", "category"]),
            # A team's month by category (the statement's ledger query groups by team, then
            # category): SQLite's planner took (billing_period, category) for it when this index
            # stopped at team, reading the whole month (the query on the two-month demo: 126 -> 88
            # and 87 -> 68 ms median, two interleaved runs). Its (billing_period, team) prefix
            # serves the team reads; PostgreSQL reads the team through the partition's team_id.
            models.Index(
                fields=["billing_period", "team", "category"], name="ledger_month_team_cat"
            ),
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
    # `inference` when the run's pods serve an inference endpoint, else `training`: the runs
    # browser and the team page list training runs; serving pods are the endpoints' cost.
    category = models.CharField(
        max_length=16,
        choices=[(Category.TRAINING.value, "Training"), (Category.INFERENCE.value, "Inference")],
        default=Category.TRAINING.value,
    )
    cost = money_field()
    # Cost of attempts that failed or were preempted (wasted work); an inference pod that served
    # traffic before it failed did useful work and is not waste, nor is a cancelled service
    # (JobRecord.service: how a server or runner stops).
    wasted_cost = money_field(default=Decimal(0))
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=Decimal(0))
    jobs = models.PositiveIntegerField(default=0)
    failed_jobs = models.PositiveIntegerField(default=0)
    running_jobs = models.PositiveIntegerField(default=0)
    first_start = models.DateTimeField(null=True, blank=True)
    last_end = models.DateTimeField(null=True, blank=True)
    billing_currency = models.CharField(max_length=3)
    # The on-demand equivalent (ListCost, or an estimate: list_cost_estimated of it), the
    # ContractedCost, and the cost by how it was bought (sums to cost).
    list_cost = money_field(default=Decimal(0))
    list_cost_estimated = money_field(default=Decimal(0))
    contracted_cost = money_field(default=Decimal(0))
    cost_on_demand = money_field(default=Decimal(0))
    cost_spot = money_field(default=Decimal(0))
    cost_commitment = money_field(default=Decimal(0))
    cost_other = money_field(default=Decimal(0))

    class Meta:
        # Cast: on SQLite money is stored as text, and text sorts "9" above "10".
        ordering = [Cast("cost", output_field=models.FloatField()).desc()]
        constraints = [
            models.UniqueConstraint(
                fields=["billing_period", "team", "run_id", "cluster", "billing_currency"],
                name="unique_run_cost",
            )
        ]
        indexes = [
            models.Index(fields=["billing_period", "category", "team"]),
            # The runs list's order (run_selectors.run_cost_list_visible): a page of a month's
            # runs is read off this index instead of sorting all of them (300,000 runs at
            # 10,000 nodes: 110-150 ms a page, on both cores, before it).
            models.Index(
                models.F("billing_period").desc(),
                Cast("cost", output_field=models.FloatField()).desc(),
                "run_id",
                name="runcost_list_order",
            ),
        ]

    def __str__(self) -> str:
        return (
            f"{self.run_id} {month_format(self.billing_period)} {self.cost} {self.billing_currency}"
        )

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Rows made one by one (admin, fixtures, factories) get the id attribution gives them.
        if self.pk is None:
            self.pk = self.stable_id()
        super().save(*args, **kwargs)

    def stable_id(self) -> int:
        """The id this run keeps across re-attributions (run_ids.run_cost_id)."""
        return run_cost_id(
            month=self.billing_period, team_id=self.team_id, cluster=self.cluster,
            currency=self.billing_currency, run_id=self.run_id,
        )  # fmt: skip

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
    # The on-demand equivalent (ListCost, or an estimate: list_cost_estimated of it), the
    # ContractedCost, and the cost by how it was bought (sums to cost).
    list_cost = money_field(default=Decimal(0))
    list_cost_estimated = money_field(default=Decimal(0))
    contracted_cost = money_field(default=Decimal(0))
    cost_on_demand = money_field(default=Decimal(0))
    cost_spot = money_field(default=Decimal(0))
    cost_commitment = money_field(default=Decimal(0))
    cost_other = money_field(default=Decimal(0))

    class Meta:
        indexes = [models.Index(fields=["billing_period", "team", "day"])]

    def __str__(self) -> str:
        return f"{self.day} {self.category} {self.amount} {self.billing_currency}"


class RecurringCharge(models.Model):
    """Budget rollup: the month's settled line items whose ChargeCategory is one of
    FINOPS_BUDGET_RECURRING_CHARGE_CATEGORIES and whose charge period lasts a day or more, summed
    per charge period, owner inputs (sub-account, tags) and currency. Budgets spread each row
    over its days as they would its line items (exact: the spread is linear in the amount) and
    resolve its owner with the mapping rules of the day, so they never read line items."""

    billing_period = models.DateField(db_index=True)
    provider_name = models.CharField(max_length=100, blank=True)
    sub_account_id = models.CharField(max_length=200, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    billing_currency = models.CharField(max_length=3)
    charge_period_start = models.DateTimeField()
    charge_period_end = models.DateTimeField()
    amount = money_field()

    def __str__(self) -> str:
        return f"{self.charge_period_start:%Y-%m-%d} {self.amount} {self.billing_currency}"


class TagCharge(models.Model):
    """Budget rollup: the month's settled EffectiveCost per tag (key, value as text), provider,
    currency and charge period, for tag-filter budgets. A line item within one UTC day is
    counted on a period of that whole day (spread by seconds, it lands there alone); a longer
    one keeps its own period, so the budget's spread over days stays exact."""

    billing_period = models.DateField()
    tag_key = models.TextField()
    tag_value = models.TextField()
    provider_name = models.CharField(max_length=100, blank=True)
    billing_currency = models.CharField(max_length=3)
    charge_period_start = models.DateTimeField()
    charge_period_end = models.DateTimeField()
    amount = money_field()

    class Meta:
        indexes = [models.Index(fields=["billing_period", "tag_key", "tag_value"])]

    def __str__(self) -> str:
        return f"{self.tag_key}={self.tag_value} {self.amount} {self.billing_currency}"


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
    # When the run began to read its inputs (after waiting for another run of the month): a
    # billing change committed after this is not in its ledger (the reconciliation says stale).
    inputs_at = models.DateTimeField(null=True, blank=True)
    # Touched by the worker while it runs (finops.core.heartbeat): a RUNNING run whose
    # heartbeat is old belongs to a dead worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # [phase, seconds] of a succeeded run, in the order the phases ended (finops.core.phases):
    # lock_wait, inputs, first_pass, reduce, conservation_check, rollup_sums, ledger_insert, ...
    phases = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"attribution {month_format(self.billing_period)} ({self.status})"


class IdlePolicy(models.Model):
    """What happens to the idle part of GPU node costs of a cluster or a node pool (DESIGN 5.4).

    A node matches the first policy (lower priority first, then id) whose cluster is blank or the
    node's cluster (the cluster of the jobs that ran on it) and whose node_prefix is blank or
    starts the node's name. Nodes no policy matches are `keep` with the line's owner.

    The pool a `spread` node's idle goes to: all nodes this policy matched when it has a
    node_prefix, else the nodes of the same cluster this policy matched.
    """

    class Policy(models.TextChoices):
        KEEP = "keep", "Keep: an explicit idle line owned by the pool owner"
        SPREAD = "spread", "Spread: onto the jobs of the pool and day, pro rata to their cost"
        PLATFORM = "platform", "Platform: a finance-owned idle bucket"

    cluster = models.CharField(max_length=100, blank=True, help_text="blank: any cluster")
    node_prefix = models.CharField(
        max_length=200, blank=True, help_text="node-name prefix of a node pool; blank: any node"
    )
    policy = models.CharField(max_length=16, choices=Policy.choices, default=Policy.KEEP)
    owner_team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="idle_policies",
        help_text="keep/spread: owner of the idle (blank: the node line's owner); "
        "platform: the platform team (blank: no team)",
    )
    priority = models.IntegerField(default=100)

    class Meta:
        ordering = ["priority", "id"]
        verbose_name_plural = "idle policies"

    def __str__(self) -> str:
        scope = f"{self.cluster or '*'}/{self.node_prefix or '*'}"
        return f"idle {scope}: {self.policy}"


class ChargeBasis(models.Model):
    """What a cluster's jobs are charged for (DESIGN 5.3). Clusters without a row: `requested`.

    `used`: a job with a JobGpuUtilisation row u counts GPUs x u (exactly); the rest of what it
    requested is idle of its node, handled by the node's idle policy. A job without a
    utilisation row is charged as requested. Ledger GPU-seconds are the charged ones.
    """

    class Basis(models.TextChoices):
        REQUESTED = "requested", "Requested: the GPUs the scheduler allocated"
        USED = "used", "Used: allocated GPUs x measured utilisation, where present"

    cluster = models.CharField(max_length=100, unique=True)
    basis = models.CharField(max_length=16, choices=Basis.choices, default=Basis.REQUESTED)

    class Meta:
        ordering = ["cluster"]
        verbose_name_plural = "charge bases"

    def __str__(self) -> str:
        return f"{self.cluster}: {self.basis}"


class SharedCostRule(models.Model):
    """Splits otherwise unallocated line items among teams as `shared` cost (DESIGN 5.5).

    Blank match fields match anything; the others compare case-insensitively. The first rule
    (lower priority first, then id) that matches a line wins.
    """

    class Method(models.TextChoices):
        EVEN = "even", "Even among the teams with spend in the month"
        GPU_SPEND = "gpu_spend", "Pro rata to GPU spend (same provider, else overall)"
        FIXED = "fixed", "Fixed percentages"

    name = models.CharField(max_length=200)
    priority = models.IntegerField(default=100)
    provider_name = models.CharField(max_length=100, blank=True)
    sub_account_id = models.CharField(max_length=200, blank=True)
    service_category = models.CharField(max_length=100, blank=True)
    service_name = models.CharField(max_length=200, blank=True)
    charge_category = models.CharField(
        max_length=32, blank=True, help_text="FOCUS ChargeCategory: Usage, Tax, Credit, ..."
    )
    method = models.CharField(max_length=16, choices=Method.choices, default=Method.EVEN)

    class Meta:
        ordering = ["priority", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.method})"


class SharedCostSplit(models.Model):
    """One team's percentage under a `fixed` SharedCostRule; a rule's rows sum to 100."""

    rule = models.ForeignKey(SharedCostRule, on_delete=models.CASCADE, related_name="splits")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="shared_cost_splits")
    percent = models.DecimalField(max_digits=9, decimal_places=6)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule", "team"], name="unique_shared_split_team"),
            models.CheckConstraint(
                condition=models.Q(percent__gt=0) & models.Q(percent__lte=100),
                name="shared_split_percent_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rule.name}: {self.team.slug} {self.percent}%"


class IdleShowbackMonth(models.Model):
    """The stored idle showback of a month (finops.attribution.selectors.idle_showback of every
    team): written with the month's ledger, in its transaction (every attribution of the month
    replaces it), read by the overview and team pages."""

    billing_period = models.DateField(unique=True)
    refreshed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"idle showback {month_format(self.billing_period)}"


class IdleShowbackRow(models.Model):
    """One team's IdleShowback in one currency of a stored month; the figures as the read-time
    computation gives them (exact text: the same value and places)."""

    month = models.ForeignKey(IdleShowbackMonth, on_delete=models.CASCADE, related_name="rows")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, db_constraint=False)
    currency = models.CharField(max_length=3)
    kept = ExactDecimalField()
    spread = ExactDecimalField()
    commitment = ExactDecimalField()
    shown_platform = ExactDecimalField()
    shown_other_teams = ExactDecimalField()
    job_cost = ExactDecimalField()
    nodes = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["month", "team"], name="idleshowback_team")]

    def __str__(self) -> str:
        return f"{self.month} {self.team_id} {self.currency}"
