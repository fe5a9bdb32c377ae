"""Kubernetes pod snapshots through the cluster's API, imported as jobs batches; and the stored
connection settings (KubernetesSource). Reading the API and writing the snapshot file is
billing_ingest/sources/kubernetes_api.py; this module decides what is recorded and imported.

Pods are upserted by cluster + `<namespace>/<pod>`, so a later snapshot turns a running pod into
a finished one with its end time, and pods that have since vanished keep their record.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from billing_ingest.models import Cluster, ImportBatch, KubernetesSource
from billing_ingest.services.batches import import_batch_create, import_batch_record_failure
from billing_ingest.services.jobs import jobs_batch_ingest
from billing_ingest.sources import SourceFetchError
from billing_ingest.sources.kubernetes_api import (
    FORMAT,
    KubernetesAccessError,
    KubernetesTransientError,
    api_client_for,
    snapshot_path,
    snapshot_write,
)


def fetch_cluster_pods(*, cluster_id: int, record_failure: bool = True) -> ImportBatch:
    """Snapshot the cluster's pods through its API and import them as one jobs batch.

    On a fetch error nothing is imported, earlier jobs stay as they are, and the error is raised
    (KubernetesTransientError for the ones worth retrying); with `record_failure` it is also
    stored as a failed batch so it shows in the import history. The caller passes False on an
    attempt it will retry, so one outage is one failed batch, not four.
    """
    cluster = Cluster.objects.get(id=cluster_id)
    source = KubernetesSource.objects.filter(cluster=cluster).first()
    if source is None:
        raise KubernetesAccessError(f"cluster {cluster.name!r} has no Kubernetes API connection")
    taken_at = timezone.now()
    path = snapshot_path(cluster_name=cluster.name, taken_at=taken_at)
    try:
        with api_client_for(source) as api_client:
            snapshot_write(
                api_client, path=path, page_size=source.page_size, cluster_name=cluster.name
            )
    except SourceFetchError as exc:
        transient = isinstance(exc, KubernetesTransientError)
        if record_failure or not transient:
            import_batch_record_failure(
                kind=ImportBatch.Kind.JOBS,
                format=FORMAT,
                source=cluster.name,
                file_name=f"Kubernetes API ({source.connection_label()})",
                error=str(exc),
            )
        raise
    batch = import_batch_create(
        kind=ImportBatch.Kind.JOBS, format=FORMAT, source=cluster.name, path=path
    )
    if batch.status == ImportBatch.Status.DUPLICATE:
        # Same pods as the last imported snapshot: that file already holds them.
        path.unlink(missing_ok=True)
        return batch
    # Pods the snapshot shows in phase Unknown were last seen now.
    return jobs_batch_ingest(batch_id=batch.pk, snapshot_time=taken_at)


def kubernetes_sources_enabled() -> list[int]:
    """Cluster ids the schedule fetches."""
    return list(
        KubernetesSource.objects.filter(enabled=True)
        .order_by("cluster_id")
        .values_list("cluster_id", flat=True)
    )


def kubernetes_source_configure(
    *,
    cluster: Cluster,
    in_cluster: bool = False,
    kubeconfig_path: str = "",
    kubeconfig_env: str = "",
    context: str = "",
    page_size: int | None = None,
) -> KubernetesSource:
    """Store (create or replace) how to reach the cluster's API; exactly one way to connect."""
    ways = [bool(in_cluster), bool(kubeconfig_path), bool(kubeconfig_env)]
    if sum(ways) != 1:
        raise ValueError("give exactly one of in-cluster, a kubeconfig path, a kubeconfig env var")
    if page_size is not None and page_size < 1:
        raise ValueError(f"page size must be at least 1, not {page_size}")
    defaults: dict[str, Any] = {
        "in_cluster": in_cluster,
        "kubeconfig_path": kubeconfig_path,
        "kubeconfig_env": kubeconfig_env,
        "context": context,
    }
    if page_size is not None:
        defaults["page_size"] = page_size
    source, _ = KubernetesSource.objects.update_or_create(cluster=cluster, defaults=defaults)
    return source
