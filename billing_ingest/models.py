"""What comes in: import batches, FOCUS-shaped cost line items, scheduler job records.

Money is Decimal with MONEY_PLACES decimal places everywhere; datetimes are UTC-aware.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from django.core.exceptions import ValidationError
from django.db import models

# Defined beside, imported here so that billing_ingest.models stays the one place to import any
# of the app's models from (and Django registers them with the app).
from billing_ingest.source_models import BillingSource as BillingSource
from billing_ingest.source_models import KubernetesSource as KubernetesSource
from finops.core.money import money_field
from finops.core.months import month_format
from finops.core.public_names import public_file_name, public_text


class Cluster(models.Model):
    """A Slurm or Kubernetes cluster whose logs we read; its settings say how to read them."""

    name = models.CharField(max_length=100, unique=True)
    # sacct prints local wall-clock time without an offset.
    time_zone = models.CharField(max_length=64, default="UTC")
    # Kubernetes GPU time-slicing: how many replicas the NVIDIA device plugin advertises per
    # physical GPU (as `nvidia.com/gpu`, or `nvidia.com/gpu.shared` with renameByDefault); one
    # replica is 1/replicas of a GPU. Every node's, unless a node pool says otherwise.
    gpu_sharing_replicas = models.PositiveIntegerField(default=1)
    # Node pools with their own replicas: {"<node-name prefix>": replicas}, the longest prefix
    # matching a pod's node wins (1: whole GPUs). billing_ingest.parsers.kubernetes_gpus.GpuSharing.
    gpu_sharing_pools = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(gpu_sharing_replicas__gte=1),
                name="cluster_gpu_sharing_replicas_positive",
            )
        ]

    def __str__(self) -> str:
        return self.name


class ImportBatch(models.Model):
    class Kind(models.TextChoices):
        BILLING = "billing"
        JOBS = "jobs"
        INFERENCE = "inference"
        UTILISATION = "utilisation"
        RUN_METRICS = "run_metrics"
        ENERGY = "energy"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SUPERSEDED = "superseded"
        DUPLICATE = "duplicate"

    class Pipeline(models.TextChoices):
        AUTO = "auto"  # whoever settles the batch wakes the pipeline
        CALLER = "caller"  # the caller, after its last batch (one run per month, not per file)
        OFF = "off"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    format = models.CharField(max_length=32)
    # Billing: the billing source (account export) name; jobs: the cluster name.
    source = models.CharField(max_length=200)
    file_name = models.CharField(max_length=1000)
    file_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    # Billing deliveries from a store: sha256 of the version the store listed when the delivery
    # was planned (newest manifest key + ETag + LastModified, Azure run blob names + ETags, GCS
    # names + generations, BigQuery month row count + newest export_time). A scheduled fetch
    # does not download a delivery whose fingerprint is its month's current batch's. "": unknown.
    delivery_fingerprint = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # Months ("YYYY-MM") of the BillingPeriodStart values the batch holds.
    billing_periods = models.JSONField(default=list, blank=True)
    row_count = models.PositiveIntegerField(default=0)
    # {"USD": {"billed": "...", "effective": "..."}} as decimal strings.
    currency_totals = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # How rows were read where the file left something out: note -> rows (ROW_NOTE).
    notes = models.JSONField(default=dict, blank=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Touched while a worker loads the batch (finops.core.heartbeat): a RUNNING batch whose
    # heartbeat is old belongs to a dead worker.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Billing: who starts the pipeline for the months the batch settles (MonthChange rows are
    # written either way; "off" marks them not to start it: --no-attribute).
    pipeline = models.CharField(max_length=8, choices=Pipeline.choices, default=Pipeline.AUTO)

    class Meta:
        verbose_name_plural = "import batches"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["kind", "source", "status"])]

    def __str__(self) -> str:
        return f"{self.kind}:{self.source}:{self.file_name} ({self.status})"

    @property
    def public_file_name(self) -> str:
        """The file's name (or bucket URI) without server folders: what pages and API show."""
        return public_file_name(self.file_name)

    @property
    def public_error(self) -> str:
        return public_text(self.error)


class ImportBatchPart(models.Model):
    """One file of a billing batch (one part of a multi-part delivery, or the batch's only
    file), loaded by its own task under the batch id. Its counts and totals are summed into the
    batch when the batch is swapped in; its error names the part, row and column."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    batch = models.ForeignKey(ImportBatch, on_delete=models.CASCADE, related_name="parts")
    index = models.PositiveIntegerField()  # 0-based position in the delivery
    # Local path the part task parses, and the name shown in errors (the remote key).
    file_name = models.CharField(max_length=1000)
    label = models.CharField(max_length=1000, blank=True)
    file_sha256 = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    row_count = models.PositiveIntegerField(default=0)
    billing_periods = models.JSONField(default=list, blank=True)
    # Same shape as ImportBatch.currency_totals.
    currency_totals = models.JSONField(default=dict, blank=True)
    notes = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "index"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "index"], name="unique_part_per_batch")
        ]

    def __str__(self) -> str:
        return f"{self.batch_id}#{self.index} {self.label or self.file_name} ({self.status})"


class MonthChange(models.Model):
    """A billing month whose settled data changed: written in the same transaction that swaps a
    billing batch in (or by a jobs command for the months its jobs overlap), so a worker dying
    right after that commit cannot lose it. The pipeline (finops.pipeline, a layer above: hence
    a plain id, not a foreign key) claims the rows with ``start_pipeline`` and attributes their
    months; the reconciliation calls a month stale while a billing change is newer than its
    last successful attribution."""

    class Kind(models.TextChoices):
        BILLING = "billing"
        JOBS = "jobs"

    month = models.DateField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    batch = models.ForeignKey(ImportBatch, null=True, blank=True, on_delete=models.SET_NULL)
    changed_at = models.DateTimeField()
    start_pipeline = models.BooleanField(default=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    pipeline_run_id = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["month", "kind", "changed_at"]),
            models.Index(
                fields=["changed_at"],
                condition=models.Q(start_pipeline=True, claimed_at__isnull=True),
                name="monthchange_unclaimed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {month_format(self.month)} at {self.changed_at:%Y-%m-%d %H:%M}"


class CostLineItemQuerySet(models.QuerySet["CostLineItem"]):
    def settled(self) -> CostLineItemQuerySet:
        """Rows of import batches that finished. A batch still loading its parts, or left
        running by a killed worker, holds rows that are not (yet) the bill: every reader of
        the bill (attribution, reconciliation, exports) sees only these."""
        return self.filter(batch__status=ImportBatch.Status.SUCCEEDED)


class CostLineItem(models.Model):
    """One FOCUS 1.2 row, with the columns that matter and the x_ fields we derive."""

    batch = models.ForeignKey(ImportBatch, on_delete=models.CASCADE, related_name="line_items")
    source = models.CharField(max_length=200)
    # First day of the month of BillingPeriodStart: the invoice the row appears on.
    billing_period = models.DateField(db_index=True)
    billing_period_start = models.DateTimeField()
    billing_period_end = models.DateTimeField(null=True, blank=True)
    provider_name = models.CharField(max_length=100, blank=True)
    billing_account_id = models.CharField(max_length=200, blank=True)
    sub_account_id = models.CharField(max_length=200, blank=True)
    # Display names as the source gave them (FOCUS BillingAccountName / SubAccountName, CUR 2.0
    # bill_payer_account_name / line_item_usage_account_name, GCP project.name, Azure
    # BillingAccountName / SubscriptionName); "" when the source has none.
    billing_account_name = models.CharField(max_length=200, blank=True)
    sub_account_name = models.CharField(max_length=200, blank=True)
    charge_period_start = models.DateTimeField()
    charge_period_end = models.DateTimeField()
    charge_category = models.CharField(max_length=32, blank=True)
    pricing_category = models.CharField(max_length=32, blank=True)
    service_category = models.CharField(max_length=100, blank=True)
    service_name = models.CharField(max_length=200, blank=True)
    sku_id = models.CharField(max_length=200, blank=True)
    region_id = models.CharField(max_length=100, blank=True)
    resource_id = models.CharField(max_length=1000, blank=True)
    resource_name = models.CharField(max_length=1000, blank=True)
    resource_type = models.CharField(max_length=200, blank=True)
    commitment_discount_id = models.CharField(max_length=1000, blank=True)
    commitment_discount_status = models.CharField(max_length=32, blank=True)
    commitment_discount_type = models.CharField(max_length=64, blank=True)
    consumed_quantity = models.DecimalField(max_digits=38, decimal_places=12, null=True, blank=True)
    consumed_unit = models.CharField(max_length=100, blank=True)
    list_cost = money_field(null=True, blank=True)
    contracted_cost = money_field(null=True, blank=True)
    billed_cost = money_field()
    effective_cost = money_field()
    billing_currency = models.CharField(max_length=3)
    tags = models.JSONField(default=dict, blank=True)
    # The credits the source applied to this row, as it gave them (GCP's `credits` array:
    # [{"type": "PROMOTION", "name": ..., "amount": "-0.000005", "id": ..., "full_name": ...}],
    # amounts as decimal text). They are already in BilledCost and EffectiveCost; kept so that
    # what reduced the row stays visible (the FOCUS export's x_Credits).
    x_credits = models.JSONField(default=list, blank=True)
    x_instance_type = models.CharField(max_length=100, blank=True)
    x_gpu_count = models.PositiveSmallIntegerField(null=True, blank=True)
    x_gpu_model = models.CharField(max_length=50, blank=True)

    objects = CostLineItemQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["source", "billing_period"]),
            models.Index(fields=["billing_period", "provider_name", "billing_account_id"]),
        ]

    def __str__(self) -> str:
        return f"{self.provider_name} {self.resource_id or self.service_name} {self.effective_cost}"


class JobRecord(models.Model):
    """One scheduler allocation (a Slurm job or array task, a Kubernetes pod), or one attempt of
    a requeued Slurm job: `sacct --duplicates` prints each attempt under the same JobID, and each
    is charged for its own time."""

    batch = models.ForeignKey(ImportBatch, on_delete=models.CASCADE, related_name="jobs")
    cluster = models.CharField(max_length=100)
    # Slurm job id, or `<namespace>/<pod name>` (63 + 1 + 253 characters at most).
    job_id = models.CharField(max_length=320)
    # 1, 2, ...: the attempts of a requeued Slurm job in the order they started (an attempt is
    # known by its start); always 1 for pods and OpenCost allocations.
    attempt = models.PositiveIntegerField(default=1)
    job_id_raw = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=500, blank=True)
    account = models.CharField(max_length=200, blank=True)
    user = models.CharField(max_length=200, blank=True)
    partition = models.CharField(max_length=200, blank=True)
    # Normalised first word of State: COMPLETED, FAILED, CANCELLED, PREEMPTED, RUNNING, ...
    state = models.CharField(max_length=32)
    start = models.DateTimeField(null=True, blank=True)
    # Null while running (sacct prints End=Unknown): cost to date.
    end = models.DateTimeField(null=True, blank=True)
    # Total GPUs over all nodes (Slurm AllocTRES gres/gpu); may be fractional (MIG). Rounded to
    # 6 places; when gpu_denominator is set the exact value is gpu_numerator / gpu_denominator
    # (a 1g MIG slice is 1/7, which no decimal holds): use exact_gpus().
    gpus = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    gpu_numerator = models.BigIntegerField(null=True, blank=True)
    gpu_denominator = models.BigIntegerField(null=True, blank=True)
    nodes = models.JSONField(default=list)
    run_id = models.CharField(max_length=500, blank=True)
    wckey = models.CharField(max_length=200, blank=True)
    comment = models.TextField(blank=True)
    # Kubernetes pods: namespace, pod labels, and the inference endpoint label
    # (`finops.io/endpoint`); empty for Slurm jobs.
    namespace = models.CharField(max_length=253, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    endpoint = models.CharField(max_length=253, blank=True)
    # A long-running server or runner, not a training run: Slurm `--comment service=true` (or
    # `finops.service=true`), pod label `finops.io/service: "true"`, or a pod of an inference
    # endpoint. It writes no checkpoints, so it gets no checkpoint advice and no rework,
    # restart or abandoned waste (finops.waste); its idle-in-allocation stays.
    service = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "job_id", "attempt"], name="unique_job_attempt_per_cluster"
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(gpu_numerator__isnull=True, gpu_denominator__isnull=True)
                    | models.Q(gpu_numerator__gte=0, gpu_denominator__gt=0)
                ),
                name="job_gpu_fraction_valid",
            ),
        ]
        indexes = [models.Index(fields=["start", "end"]), models.Index(fields=["run_id"])]

    def __str__(self) -> str:
        attempt = f" (attempt {self.attempt})" if self.attempt > 1 else ""
        return f"{self.cluster}:{self.job_id}{attempt}"

    def exact_gpus(self) -> Fraction:
        return job_gpus_exact(
            gpus=self.gpus, numerator=self.gpu_numerator, denominator=self.gpu_denominator
        )


def job_gpus_exact(*, gpus: Decimal, numerator: int | None, denominator: int | None) -> Fraction:
    """A job's GPUs exactly: the stored fraction when there is one (MIG slices, time-sliced
    replicas), else the 6-place `gpus` (Slurm counts, which are exact decimals)."""
    if numerator is not None and denominator:
        return Fraction(numerator, denominator)
    return Fraction(gpus)


class CoreWeaveRate(models.Model):
    """A contract rate for one CoreWeave instance type and pricing category, valid for a span
    of days. CoreWeave's FOCUS export carries usage quantities only, so the ingest prices each
    row as ConsumedQuantity x the rate valid on its ChargePeriodStart (UTC) day."""

    class PricingCategory(models.TextChoices):
        # FOCUS PricingCategory values: on-demand, reserved capacity, spot.
        STANDARD = "Standard"
        COMMITTED = "Committed"
        DYNAMIC = "Dynamic"

    instance_type = models.CharField(max_length=100, help_text="e.g. gd-8xh100ib-i128")
    pricing_category = models.CharField(
        max_length=32, choices=PricingCategory.choices, default=PricingCategory.STANDARD
    )
    currency = models.CharField(max_length=3, help_text="ISO 4217 code, e.g. USD")
    rate = money_field(help_text="price of one unit (one node-hour for GPU instances)")
    unit = models.CharField(max_length=32, default="Hours", help_text="FOCUS ConsumedUnit")
    valid_from = models.DateField(help_text="first day the rate applies")
    valid_to = models.DateField(
        null=True, blank=True, help_text="last day the rate applies (inclusive); empty: open"
    )

    class Meta:
        verbose_name = "CoreWeave rate"
        verbose_name_plural = "CoreWeave rates"
        ordering = ["instance_type", "pricing_category", "currency", "valid_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["instance_type", "pricing_category", "currency", "valid_from"],
                name="unique_coreweave_rate_start",
            ),
            models.CheckConstraint(
                condition=models.Q(valid_to__isnull=True)
                | models.Q(valid_to__gte=models.F("valid_from")),
                name="coreweave_rate_valid_to_after_from",
            ),
            models.CheckConstraint(
                condition=models.Q(rate__gte=0), name="coreweave_rate_not_negative"
            ),
        ]

    def __str__(self) -> str:
        until = self.valid_to.isoformat() if self.valid_to else "open"
        return (
            f"{self.instance_type} {self.pricing_category} {self.rate} {self.currency}/"
            f"{self.unit} {self.valid_from.isoformat()}..{until}"
        )

    def clean(self) -> None:
        self.currency = self.currency.strip().upper()
        self.instance_type = self.instance_type.strip()
        if self.valid_from is None:
            return  # the field's own validation reports it
        # Two rates valid on the same day would make the price of a usage row ambiguous; the
        # ingest refuses such rows, so refuse the overlap where it is typed in.
        overlapping = CoreWeaveRate.objects.filter(
            instance_type=self.instance_type,
            pricing_category=self.pricing_category,
            currency=self.currency,
        ).exclude(pk=self.pk)
        if self.valid_to is not None:
            overlapping = overlapping.filter(valid_from__lte=self.valid_to)
        overlapping = overlapping.filter(
            models.Q(valid_to__isnull=True) | models.Q(valid_to__gte=self.valid_from)
        )
        clash = overlapping.first()
        if clash is not None:
            raise ValidationError(
                f"overlaps another {self.instance_type} {self.pricing_category} "
                f"{self.currency} rate: {clash}"
            )


class JobGpuUtilisation(models.Model):
    """Measured GPU utilisation of one job (0..1), e.g. the average of DCGM's
    DCGM_FI_PROF_GR_ENGINE_ACTIVE over the job's run. Read by attribution on clusters whose charge
    basis is `used`; one row per (cluster, job id), replaced by each newer import."""

    cluster = models.CharField(max_length=100)
    # JobRecord.job_id of the job (a Slurm job id, `<namespace>/<pod>`).
    job_id = models.CharField(max_length=320)
    utilisation = models.DecimalField(max_digits=7, decimal_places=6)
    batch = models.ForeignKey(
        ImportBatch, on_delete=models.CASCADE, related_name="gpu_utilisations"
    )

    class Meta:
        verbose_name = "job GPU utilisation"
        verbose_name_plural = "job GPU utilisations"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "job_id"], name="unique_gpu_utilisation_per_job"
            ),
            models.CheckConstraint(
                condition=models.Q(utilisation__gte=0) & models.Q(utilisation__lte=1),
                name="gpu_utilisation_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster}:{self.job_id} {self.utilisation}"
