"""Measured GPU energy per job attempt and node (DESIGN section 9)."""

from __future__ import annotations

from django.db import models

from billing_ingest.models import ImportBatch


class JobEnergy(models.Model):
    """The GPU energy DCGM measured for one attempt of a job on one node, in joules (6 places):
    the job's share of each GPU it held (a whole GPU, or its fraction of a shared one), summed.

    Keyed by the job as JobRecord names it (cluster, job id, attempt), not by the record's row:
    re-importing the job logs replaces their rows, and the energy stays joined."""

    class Method(models.TextChoices):
        COUNTER = "counter"  # DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION increases
        POWER = "power"  # DCGM_FI_DEV_POWER_USAGE integrated over time
        MIXED = "mixed"  # some GPUs by counter, others by power

    batch = models.ForeignKey(ImportBatch, on_delete=models.CASCADE, related_name="job_energy")
    cluster = models.CharField(max_length=100)
    job_id = models.CharField(max_length=320)
    attempt = models.PositiveIntegerField(default=1)
    node = models.CharField(max_length=1000)
    joules = models.DecimalField(max_digits=24, decimal_places=6)
    method = models.CharField(max_length=8, choices=Method.choices)
    gpus_measured = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "job_id", "attempt", "node"], name="unique_job_energy"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster}:{self.job_id}#{self.attempt} {self.node} {self.joules} J"
