"""Kubernetes pods read from the cluster's API with the official `kubernetes` client.

A snapshot lists the pods of all namespaces page by page (`limit` + `continue`), writes them as
the `List` document `kubectl get pods -A -o json` prints (each pod through the client's own
`ApiClient().sanitize_for_serialization`, so the `kubernetes` parser reads it unchanged) to
FINOPS_DATA_DIR/kubernetes/<cluster>/<UTC timestamp>.json; billing_ingest/services/kubernetes.py
imports that file as one jobs batch (this module only reads the API and writes the file).

Connection settings live on the cluster's KubernetesSource: in-cluster service account, a
kubeconfig path on the worker, or the name of an environment variable holding that path.

Errors are sorted by what a retry could change: `KubernetesTransientError` (connection refused
or reset, timeouts, 429 and 5xx) may pass; `KubernetesAccessError` (401, 403, unreadable or
missing configuration, TLS verification failure) will not until someone fixes the setup; any
other API error is a plain SourceFetchError. Nothing is imported unless the whole list was read.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import urllib3
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from billing_ingest.models import KubernetesSource
from billing_ingest.parsers.bounds import json_depth_exceeds, max_json_depth
from billing_ingest.sources import SourceAccessError, SourceFetchError

FORMAT = "kubernetes"
# (connect, read) seconds for one list page; a page of 500 pods is well under a megabyte.
REQUEST_TIMEOUT = (10.0, 120.0)
# HTTP statuses a later attempt may get past: throttled, or the API server / its proxy failing.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
_GONE = 410
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class KubernetesAccessError(SourceAccessError):
    """The API refused the credentials or the connection is misconfigured: retrying won't help."""


class KubernetesTransientError(SourceFetchError):
    """The API could not be reached or failed server-side; a later attempt may succeed."""


# --- client ------------------------------------------------------------------------------------


def api_client_for(source: KubernetesSource) -> k8s.ApiClient:
    """A client configured from the source's in-cluster account or kubeconfig (read-only: a
    refreshed token is never written back into the worker's kubeconfig)."""
    configuration = k8s.Configuration()
    try:
        if source.in_cluster:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=_kubeconfig_path(source),
                context=source.context or None,
                client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, OSError) as exc:
        raise KubernetesAccessError(
            f"cluster {source.cluster.name!r}: cannot load {source.connection_label()}: {exc}"
        ) from None
    # One attempt per request: retries are the task's, with backoff, and counted there.
    configuration.retries = False
    return k8s.ApiClient(configuration)


def _kubeconfig_path(source: KubernetesSource) -> str:
    if not source.kubeconfig_env:
        return source.kubeconfig_path
    path = os.environ.get(source.kubeconfig_env, "").strip()
    if not path:
        raise ConfigException(f"environment variable {source.kubeconfig_env} is not set")
    return path


# --- listing -----------------------------------------------------------------------------------


def pod_pages(
    api_client: k8s.ApiClient, *, page_size: int, cluster_name: str
) -> Iterator[list[dict[str, Any]]]:
    """Pods of all namespaces, one page (already in their JSON shape) at a time.

    A `continue` token expires after a few minutes (410 Gone); the caller restarts the list.
    """
    core = k8s.CoreV1Api(api_client)
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": page_size, "_request_timeout": REQUEST_TIMEOUT}
        if token:
            kwargs["_continue"] = token
        try:
            page = core.list_pod_for_all_namespaces(**kwargs)
        except k8s.ApiException as exc:
            raise api_error(exc, cluster_name=cluster_name, continued=bool(token)) from None
        except urllib3.exceptions.HTTPError as exc:
            raise connection_error(exc, cluster_name=cluster_name) from None
        yield [api_client.sanitize_for_serialization(pod) for pod in page.items or []]
        token = page.metadata._continue if page.metadata is not None else None
        if not token:
            return


class ContinueExpiredError(SourceFetchError):
    """410 Gone on a continued page: the list snapshot expired; start the list again."""


def api_error(exc: k8s.ApiException, *, cluster_name: str, continued: bool) -> SourceFetchError:
    status = int(exc.status or 0)
    detail = _status_message(exc)
    where = f"Kubernetes API of cluster {cluster_name!r}"
    if status == 401:
        return KubernetesAccessError(
            f"{where} rejected the credentials (401 Unauthorized: {detail}); renew the token "
            "or client certificate in the kubeconfig"
        )
    if status == 403:
        return KubernetesAccessError(
            f"{where} refused to list pods in all namespaces (403 Forbidden: {detail}); the "
            "account needs `list` on `pods` cluster-wide (a ClusterRole bound with a "
            "ClusterRoleBinding)"
        )
    if status == _GONE and continued:
        return ContinueExpiredError(f"{where}: list continue token expired ({detail})")
    if status in TRANSIENT_STATUSES:
        return KubernetesTransientError(f"{where} answered {status} {exc.reason}: {detail}")
    return SourceFetchError(f"{where} answered {status} {exc.reason}: {detail}")


def connection_error(exc: urllib3.exceptions.HTTPError, *, cluster_name: str) -> SourceFetchError:
    reason = getattr(exc, "reason", None) or exc
    message = f"Kubernetes API of cluster {cluster_name!r} unreachable: {reason}"
    if isinstance(reason, urllib3.exceptions.SSLError) or isinstance(
        exc, urllib3.exceptions.SSLError
    ):
        # A certificate that does not verify will not verify on the next attempt either.
        return KubernetesAccessError(message)
    return KubernetesTransientError(message)


def _status_message(exc: k8s.ApiException) -> str:
    """The `message` of the Status object the API server sends with an error, else the body."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        if json_depth_exceeds(body or "", max_json_depth()):
            raise ValueError("nested too deep")
        parsed = json.loads(body or "")
    except ValueError:
        return (str(body or exc.reason or "")).strip()[:500]
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"])
    return str(parsed)[:500]


# --- snapshot file -----------------------------------------------------------------------------


def snapshot_path(*, cluster_name: str, taken_at: datetime) -> Path:
    folder = Path(settings.FINOPS_DATA_DIR) / "kubernetes" / _SAFE_NAME.sub("_", cluster_name)
    return folder / f"{taken_at.strftime('%Y%m%dT%H%M%S%fZ')}.json"


def snapshot_write(
    api_client: k8s.ApiClient, *, path: Path, page_size: int, cluster_name: str
) -> int:
    """Write every pod to `path` as a `kubectl get pods -A -o json` List; returns the pod count.

    Written page by page to a temporary file renamed into place at the end, so memory stays one
    page and a failed listing leaves no file. The list's resourceVersion is left out (kubectl
    prints it empty too): an unchanged cluster then gives identical bytes, which the import
    recognises as a duplicate and skips.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (renamed, not closed, on success)
        "w", encoding="utf-8", dir=path.parent, suffix=".part", delete=False
    )
    try:
        with handle:
            count = _write_list(handle, api_client, page_size=page_size, cluster_name=cluster_name)
        Path(handle.name).replace(path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return count


def _write_list(
    handle: IO[str], api_client: k8s.ApiClient, *, page_size: int, cluster_name: str
) -> int:
    for attempt in range(2):
        handle.seek(0)
        handle.truncate()
        handle.write('{"apiVersion":"v1","items":[')
        count = 0
        try:
            for page in pod_pages(api_client, page_size=page_size, cluster_name=cluster_name):
                for pod in page:
                    handle.write("," if count else "")
                    handle.write(json.dumps(pod, separators=(",", ":"), sort_keys=True))
                    count += 1
        except ContinueExpiredError:
            if attempt:
                raise
            continue  # a fresh list from the start: the pages must be one consistent snapshot
        handle.write('],"kind":"List","metadata":{"resourceVersion":""}}\n')
        return count
    raise AssertionError("unreachable")  # pragma: no cover
