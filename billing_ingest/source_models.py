"""Where the scheduled fetches read from: billing exports (BillingSource) and Kubernetes API
servers (KubernetesSource). Configuration only, never a credential.

Models of billing_ingest; import them from billing_ingest.models like the others.
"""

from __future__ import annotations

from django.db import models


class KubernetesSource(models.Model):
    """How to reach a Kubernetes cluster's API to snapshot its pods (scheduled every 15 minutes).

    Exactly one way to connect: the worker's in-cluster service account, a kubeconfig file path
    on the worker, or the name of an environment variable holding that path. Never a credential:
    tokens and keys stay in the kubeconfig or the mounted service account, outside the database.
    """

    cluster = models.OneToOneField(
        "billing_ingest.Cluster", on_delete=models.CASCADE, related_name="kubernetes_source"
    )
    in_cluster = models.BooleanField(
        default=False, help_text="use the service account of the pod the worker runs in"
    )
    kubeconfig_path = models.CharField(
        max_length=1000, blank=True, help_text="kubeconfig file on the worker"
    )
    kubeconfig_env = models.CharField(
        max_length=200, blank=True, help_text="environment variable naming the kubeconfig file"
    )
    context = models.CharField(
        max_length=253, blank=True, help_text="kubeconfig context (empty: its current-context)"
    )
    # Pods per list request: large lists are paged (limit + continue) so no single response
    # holds a whole 100k-pod cluster.
    page_size = models.PositiveIntegerField(default=500)
    enabled = models.BooleanField(default=True, help_text="fetched by the 15-minute schedule")

    class Meta:
        verbose_name = "Kubernetes source"
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(in_cluster=True, kubeconfig_path="", kubeconfig_env="")
                    | (
                        models.Q(in_cluster=False, kubeconfig_env="")
                        & ~models.Q(kubeconfig_path="")
                    )
                    | (
                        models.Q(in_cluster=False, kubeconfig_path="")
                        & ~models.Q(kubeconfig_env="")
                    )
                ),
                name="kubernetes_source_one_connection",
            ),
            models.CheckConstraint(
                condition=models.Q(page_size__gte=1), name="kubernetes_source_page_size_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}: {self.connection_label()}"

    def connection_label(self) -> str:
        """How it connects, for messages and the import history (never a secret)."""
        if self.in_cluster:
            label = "in-cluster service account"
        elif self.kubeconfig_env:
            label = f"kubeconfig from ${self.kubeconfig_env}"
        else:
            label = f"kubeconfig {self.kubeconfig_path}"
        return f"{label}, context {self.context}" if self.context else label


class BillingSource(models.Model):
    """A billing export fetched on a schedule (every 6 hours, see finops/celery.py), exactly as
    `ingest_billing --format FORMAT URI` would import it: each delivery (the newest manifest of
    a billing period, the newest run of an Azure export) one import batch, whose source is
    FORMAT:URI of the export. The same export imported by hand and by schedule therefore restates
    the same rows, and content seen before is a duplicate, never a second copy.

    Where it is: a URI, or an AWS Data Export (ARN or name) whose S3 location and format are
    discovered with the bcm-data-exports API on every fetch (and written back to uri and
    format). Never a credential: the worker's environment supplies them (boto3's default chain,
    AZURE_STORAGE_CONNECTION_STRING, Google application default credentials).
    """

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    name = models.CharField(max_length=100, unique=True)
    format = models.CharField(
        max_length=32,
        blank=True,
        help_text=(
            "ingest_billing format (aws-cur, focus, azure, gcp-bigquery, ...); with an AWS "
            "export named, empty means: from the table the export queries"
        ),
    )
    uri = models.CharField(
        max_length=1000,
        blank=True,
        help_text=(
            "s3://BUCKET/PREFIX/EXPORT-NAME, az://CONTAINER/PREFIX, gs://... or "
            "bq://PROJECT.DATASET.TABLE; filled in by discovery when an AWS export is named"
        ),
    )
    aws_export_arn = models.CharField(
        max_length=2048, blank=True, help_text="AWS Data Export ARN (discovered location)"
    )
    aws_export_name = models.CharField(
        max_length=128,
        blank=True,
        help_text="AWS Data Export name, looked up with ListExports when no ARN is given",
    )
    enabled = models.BooleanField(default=True, help_text="fetched by the 6-hourly schedule")
    # The claim of the run fetching it now (null: none). Set by a conditional UPDATE so that two
    # overlapping runs never both fetch; a claim older than the fetch's time limit is a dead run's.
    fetch_started_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_fetched_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_status = models.CharField(
        max_length=16, choices=Status.choices, blank=True, editable=False
    )
    # What the last fetch did (months imported, unchanged, failed), or why it failed.
    last_message = models.TextField(blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(uri="")
                | ~models.Q(aws_export_arn="")
                | ~models.Q(aws_export_name=""),
                name="billing_source_has_location",
            ),
            models.CheckConstraint(
                condition=~models.Q(format="")
                | ~models.Q(aws_export_arn="")
                | ~models.Q(aws_export_name=""),
                name="billing_source_has_format",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def aws_export_named(self) -> bool:
        return bool(self.aws_export_arn or self.aws_export_name)
