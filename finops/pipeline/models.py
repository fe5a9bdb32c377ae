"""Pipeline runs: one per month each time its data changed (or someone asked), step by step."""

from __future__ import annotations

from django.db import models

from finops.core.months import month_format


class PipelineRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"  # queued, no step started yet
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    month = models.DateField(db_index=True)  # first day of the billing month
    # Who asked: "import batch 12, 13", "attribute command", "nightly", "retry of run 7", ...
    reason = models.CharField(max_length=300)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempt = models.PositiveSmallIntegerField(default=1)
    retry_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Last sign of life: set when a step starts or ends, and by the running step's heartbeat.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["month", "-id"]), models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"pipeline {month_format(self.month)} #{self.pk} ({self.status})"


class PipelineStep(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        # Its task handed the work to other tasks (a split attribution's chord): the run carries
        # on when the last of them sends finops.pipeline.resume (pipeline_step_resume).
        WAITING = "waiting"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped"  # an earlier step failed

    run = models.ForeignKey(PipelineRun, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveSmallIntegerField()
    key = models.CharField(max_length=64)
    task = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="unique_step_per_pipeline_run")
        ]

    def __str__(self) -> str:
        return f"{self.run_id}.{self.index} {self.key} ({self.status})"
