"""Inference endpoints: request and token usage per hour, and cost per endpoint and day.

InferenceUsage rows come from `ingest_inference` (vLLM / Triton counters or a CSV). Their import
batch is a billing_ingest ImportBatch of kind INFERENCE: one import history for every file the
system reads, on the same pages and API.

EndpointCost is a rollup written by `endpoint_costs_rebuild` from the AllocatedCost ledger (the
rows of the pods whose JobRecord.endpoint is the endpoint) joined with InferenceUsage per UTC day,
one row per team that owns pods of the endpoint: a team lead sees their teams' share only.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models.functions import Cast

from billing_ingest.models import ImportBatch
from finops.core.money import money_field
from finops.org.models import Team

INFERENCE_BATCH_KIND = ImportBatch.Kind.INFERENCE


class InferenceUsage(models.Model):
    """Requests and tokens one endpoint (one pod, when the source says) served in one window.

    Windows are UTC hours [window_start, window_end) for Prometheus sources; CSV rows bring
    their own window, which must lie within one UTC day. A later import of the same window and
    series key replaces the row (a restatement), it is not added to it.
    """

    batch = models.ForeignKey(ImportBatch, on_delete=models.CASCADE, related_name="inference_usage")
    cluster = models.CharField(max_length=100)
    endpoint = models.CharField(max_length=253)
    model_name = models.CharField(max_length=500, blank=True)
    # The team label on the series (`finops_io_team`, `team`), if any: a hint, not attribution.
    team_hint = models.CharField(max_length=200, blank=True)
    namespace = models.CharField(max_length=253, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    requests = models.BigIntegerField(default=0)
    # Triton `nv_inference_count`: inferences performed (a batch of n counts n); 0 for vLLM.
    inferences = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    generation_tokens = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "endpoint", "model_name", "namespace", "pod", "window_start"],
                name="unique_inference_usage_window",
            ),
            models.CheckConstraint(
                condition=models.Q(window_end__gt=models.F("window_start")),
                name="inference_usage_window_positive",
            ),
            models.CheckConstraint(
                condition=models.Q(requests__gte=0)
                & models.Q(inferences__gte=0)
                & models.Q(prompt_tokens__gte=0)
                & models.Q(generation_tokens__gte=0),
                name="inference_usage_counts_not_negative",
            ),
        ]
        indexes = [models.Index(fields=["endpoint", "window_start"])]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.window_start:%Y-%m-%d %H:%M} {self.requests} req"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.generation_tokens


class EndpointCost(models.Model):
    """Cost and usage of one team's part of one endpoint on one UTC day, in one currency.

    An endpoint's pods may belong to several teams (a pod is its ledger rows' team); each team
    gets its own row, so no team's figure depends on another team's pods.

    cost / gpu_seconds: the ledger rows (of billing month `billing_period`) of the team's pods of
    the endpoint, including idle the `spread` policy put on them. Usage: InferenceUsage of that
    day (every cluster), counted in full in each currency row of the team's endpoint-day. A usage
    row that names a pod counts for that pod's team; usage naming no known pod goes whole to the
    only team serving the endpoint that day, or, with several, is split between them pro rata
    to their GPU-seconds there (largest remainder: the teams' counts add up to the usage).

    idle_share: node_idle_cost / node_cost, where node_cost is everything the ledger holds on the
    nodes that served the team's pods of the endpoint that day (every team's rows there) plus
    idle the `spread` policy moved onto jobs that ran on those nodes that day, and
    node_idle_cost is the idle part of that. These include other teams' cost: finance only.
    """

    billing_period = models.DateField(db_index=True)
    day = models.DateField()
    endpoint = models.CharField(max_length=253)
    # The team owning the pods this row counts; null: pods no team owns (finance only).
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT)
    billing_currency = models.CharField(max_length=3)
    cost = money_field()
    gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=Decimal(0))
    pods = models.PositiveIntegerField(default=0)
    requests = models.BigIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    generation_tokens = models.BigIntegerField(default=0)
    tokens = models.BigIntegerField(default=0)
    cost_per_1k_requests = money_field(null=True, blank=True)
    cost_per_1m_tokens = money_field(null=True, blank=True)
    node_cost = money_field(default=Decimal(0))
    node_idle_cost = money_field(default=Decimal(0))
    idle_share = models.DecimalField(max_digits=9, decimal_places=6, null=True, blank=True)

    class Meta:
        # Cast: on SQLite money is stored as text, and text sorts "9" above "10".
        ordering = ["day", Cast("cost", output_field=models.FloatField()).desc()]
        constraints = [
            models.UniqueConstraint(
                fields=["billing_period", "day", "endpoint", "team", "billing_currency"],
                name="unique_endpoint_cost_team_day",
            )
        ]
        indexes = [models.Index(fields=["billing_period", "endpoint"])]

    def __str__(self) -> str:
        owner = self.team.slug if self.team_id and self.team else "-"
        return f"{self.endpoint} {owner} {self.day} {self.cost} {self.billing_currency}"
