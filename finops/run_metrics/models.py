"""Training-run progress (DESIGN section 9): one TrainingRun per (team, run id) with the run's
constants, and its logged steps (RunMetricPoint).

A run is named as attribution groups jobs (JobRecord.run_id: wckey, `--comment run=`, the
`finops.io/run` label, or the job name) plus the team's slug where run ids repeat across teams
(blank: any team's run of that id). Nothing here points at the ledger: a run whose jobs have not
arrived yet is kept, and the efficiency selectors join it to RunCost when they read.

Points are cumulative counts at a step, as the run logged them: after a restart from a checkpoint
they go back to the checkpoint's values, so the points of one run, in time order, show every
attempt (issue 31 reads its checkpoints and restarts from them). Each point remembers the file it
came from: importing a file again replaces that file's points of its runs, and the points other
files brought (another attempt's log) stay.
"""

from __future__ import annotations

from django.db import models

from billing_ingest.models import ImportBatch

RUN_METRICS_BATCH_KIND = ImportBatch.Kind.RUN_METRICS


class TrainingRun(models.Model):
    """A training run's identity and constants (the last non-empty value of its imports wins)."""

    # Team slug as the metrics name it ("" when they do not; matched to any team's run).
    team_slug = models.CharField(max_length=100, blank=True)
    run_id = models.CharField(max_length=500)
    # Parameters of the model; flops_per_token defaults to 6 x model_params (DESIGN section 9).
    model_params = models.BigIntegerField(null=True, blank=True)
    flops_per_token = models.BigIntegerField(null=True, blank=True)
    # Training precision, lower case: bf16 (default when empty), fp16, fp8, tf32, fp32.
    dtype = models.CharField(max_length=16, blank=True)
    batch = models.ForeignKey(
        ImportBatch, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team_slug", "run_id"], name="unique_training_run"),
            models.CheckConstraint(
                condition=models.Q(model_params__isnull=True) | models.Q(model_params__gt=0),
                name="training_run_model_params_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(flops_per_token__isnull=True) | models.Q(flops_per_token__gt=0),
                name="training_run_flops_per_token_positive",
            ),
        ]
        indexes = [models.Index(fields=["run_id"])]

    def __str__(self) -> str:
        return f"{self.team_slug or '*'}/{self.run_id}"


class RunMetricPoint(models.Model):
    """One logged step of a run: cumulative tokens and samples at that step, and whether a
    checkpoint was saved there."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="points")
    batch = models.ForeignKey(ImportBatch, on_delete=models.CASCADE, related_name="+")
    # The file the point came from (ImportBatch.file_name of the import that brought it, the
    # file itself for a folder): what a later import of the same file replaces.
    source_file = models.CharField(max_length=1000)
    # The 1-based line of that file (a log's line, a CSV's row with the header as row 1).
    line = models.PositiveIntegerField()
    timestamp = models.DateTimeField()
    step = models.BigIntegerField()
    tokens = models.BigIntegerField(null=True, blank=True)
    samples = models.BigIntegerField(null=True, blank=True)
    checkpoint = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(step__gte=0)
                & (models.Q(tokens__isnull=True) | models.Q(tokens__gte=0))
                & (models.Q(samples__isnull=True) | models.Q(samples__gte=0)),
                name="run_metric_point_counts_not_negative",
            )
        ]
        indexes = [
            models.Index(fields=["run", "timestamp"]),
            models.Index(fields=["run", "source_file"]),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} step {self.step} at {self.timestamp:%Y-%m-%d %H:%M:%S}"


class RunMetricsImport(models.Model):
    """What the command line said for one import batch, for formats whose files do not name
    their run (log lines): read by the task, which takes only the batch id."""

    batch = models.OneToOneField(
        ImportBatch, on_delete=models.CASCADE, primary_key=True, related_name="run_metrics_import"
    )
    run_id = models.CharField(max_length=500, blank=True)
    team_slug = models.CharField(max_length=100, blank=True)
    model_params = models.BigIntegerField(null=True, blank=True)
    flops_per_token = models.BigIntegerField(null=True, blank=True)
    dtype = models.CharField(max_length=16, blank=True)
    # Tokens per sample, where the log prints samples only (Megatron's consumed samples).
    seq_length = models.PositiveIntegerField(null=True, blank=True)
    # Samples per step, where the log prints steps only (torchtitan: else from the log).
    global_batch_size = models.PositiveIntegerField(null=True, blank=True)
    # When the attempt started, for logs that count seconds from their start (Lightning).
    started_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"batch {self.batch_id}: {self.team_slug or '*'}/{self.run_id or '(file)'}"


class RunPlan(models.Model):
    """A plan saved for a run before it ran (the planner's estimate), compared with what the run
    did on its page. The newest plan of a (team, run id) is the one shown."""

    team = models.ForeignKey("org.Team", on_delete=models.CASCADE, related_name="run_plans")
    run_id = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)
    model_params = models.BigIntegerField()
    tokens = models.BigIntegerField()
    flops_per_token = models.BigIntegerField(null=True, blank=True)
    gpu_model = models.CharField(max_length=16)
    gpu_count = models.PositiveIntegerField()
    dtype = models.CharField(max_length=16)
    mfu = models.DecimalField(max_digits=10, decimal_places=6)
    mfu_basis = models.CharField(max_length=200)
    gpu_hours = models.DecimalField(max_digits=24, decimal_places=2)
    wall_hours = models.DecimalField(max_digits=24, decimal_places=2)
    # The way of buying chosen (cheapest unless named) and its estimated cost.
    provider = models.CharField(max_length=32, blank=True)
    instance_type = models.CharField(max_length=100, blank=True)
    pricing = models.CharField(max_length=32)
    cost = models.DecimalField(max_digits=24, decimal_places=2)
    currency = models.CharField(max_length=3)

    class Meta:
        indexes = [models.Index(fields=["team", "run_id", "-created_at"])]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(mfu__gt=0) & models.Q(gpu_hours__gte=0) & models.Q(cost__gte=0),
                name="run_plan_figures_positive",
            )
        ]

    def __str__(self) -> str:
        return f"plan of {self.run_id}: {self.gpu_hours} GPU-hours, {self.cost} {self.currency}"
