"""Kubernetes API snapshot tasks: a dispatcher the 15-minute schedule runs, and one fetch per
cluster (see finops/celery.py for why every 15 minutes)."""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.utils import timezone

from billing_ingest.services.kubernetes import fetch_cluster_pods, kubernetes_sources_enabled
from billing_ingest.services.snapshots import kubernetes_snapshots_prune
from billing_ingest.sources.kubernetes_api import KubernetesTransientError

__all__ = [
    "fetch_kubernetes_pods_all",
    "fetch_kubernetes_pods_task",
    "prune_kubernetes_snapshots",
]

# A snapshot must end before the next one starts 15 minutes later: two snapshots of one
# cluster imported out of order would turn a finished pod back into a running one. Listing
# 100k pods in pages of 500 is a few minutes.
SOFT_TIME_LIMIT = 10 * 60
TIME_LIMIT = 11 * 60
# A queued per-cluster fetch older than this is dropped: the next schedule's is fresher.
FETCH_EXPIRES = 14 * 60
MAX_RETRIES = 3
# Seconds before retry 1, 2, 3 (30, 60, 120): past a rolling API server restart, and all of
# them inside the 15-minute window.
RETRY_BACKOFF = 30


@shared_task(
    bind=True,
    name="billing_ingest.tasks.kubernetes.fetch_kubernetes_pods_task",
    acks_late=True,
    max_retries=MAX_RETRIES,
    soft_time_limit=SOFT_TIME_LIMIT,
    time_limit=TIME_LIMIT,
)
def fetch_kubernetes_pods_task(self: Task, cluster_id: int) -> dict[str, Any]:
    """Snapshot one cluster's pods and import them. Only transient errors (unreachable API,
    429, 5xx) are retried, with backoff; a refusal (401/403) or a bad configuration fails at
    once with the reason, recorded as a failed batch. Safe to re-run: pods are upserted."""
    last_attempt = self.request.retries >= MAX_RETRIES
    try:
        batch = fetch_cluster_pods(cluster_id=cluster_id, record_failure=last_attempt)
    except KubernetesTransientError as exc:
        if last_attempt:
            raise
        raise self.retry(exc=exc, countdown=RETRY_BACKOFF * 2**self.request.retries) from None
    return {
        "batch_id": batch.pk,
        "status": batch.status,
        "row_count": batch.row_count,
        "error": batch.error,
        "notes": batch.notes,
    }


@shared_task(
    name="billing_ingest.tasks.kubernetes.fetch_kubernetes_pods_all",
    soft_time_limit=60,
    time_limit=90,
)
def fetch_kubernetes_pods_all() -> list[int]:
    """Queue one fetch per cluster with an enabled API connection; returns their cluster ids.
    Fanned out so one slow or unreachable cluster does not hold up the others."""
    cluster_ids = kubernetes_sources_enabled()
    for cluster_id in cluster_ids:
        fetch_kubernetes_pods_task.apply_async(args=(cluster_id,), expires=FETCH_EXPIRES)
    return cluster_ids


@shared_task(
    name="billing_ingest.tasks.kubernetes.prune_kubernetes_snapshots",
    soft_time_limit=10 * 60,
    time_limit=11 * 60,
)
def prune_kubernetes_snapshots() -> dict[str, int]:
    """Delete snapshot files past FINOPS_KUBERNETES_SNAPSHOT_DAYS. Idempotent: a second run
    finds nothing more to delete."""
    result = kubernetes_snapshots_prune(
        now=timezone.now(), keep_days=settings.FINOPS_KUBERNETES_SNAPSHOT_DAYS
    )
    return {"files": result.files, "bytes": result.bytes}
