"""Kubernetes pods: values read off one pod, pure: its run and account from labels (the run label,
the Job name, else the workload without its pod-template hash; the team label, else the
namespace) and its times (RFC 3339, the latest a pod's status shows)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from billing_ingest.parsers.kubernetes_gpus import (
    _nested,
)

RUN_LABEL = "finops.io/run"


TEAM_LABELS = ("finops.io/team", "team")


ENDPOINT_LABEL = "finops.io/endpoint"


# `finops.io/service: "true"`: a long-running server or runner, not a training run (no
# checkpoint advice, no rework, restart or abandoned waste). An endpoint's pods are services.
SERVICE_LABEL = "finops.io/service"


JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")


RUN_LABELS = (RUN_LABEL, *JOB_NAME_LABELS)


# The hash a Deployment (or an Argo Rollout) appends to its ReplicaSet's name and labels the
# pods with.
TEMPLATE_HASH_LABELS = ("pod-template-hash", "rollouts-pod-template-hash")


def parse_time(value: object) -> datetime:
    """An RFC 3339 time as Kubernetes prints it (`2024-09-03T10:00:00Z`), as UTC."""
    if not isinstance(value, str):
        raise ValueError(f"expected an RFC 3339 time string, found {value!r}")
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"unparseable time {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"time {value!r} has no offset")
    return parsed.astimezone(UTC)


def label_text(labels: Mapping[str, object], *keys: str) -> str:
    for key in keys:
        value = labels.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def workload_name(*, owner: str, pod_name: str, template_hash: str) -> str:
    """The workload a pod belongs to: its controller without the pod-template hash (a
    Deployment's ReplicaSet `nginx-7fb78fb6d8` -> `nginx`, as OpenCost names the controller),
    else the pod without `-<hash>-<suffix>`, else the owner or pod as given."""
    if template_hash:
        suffix = f"-{template_hash}"
        if owner.endswith(suffix) and len(owner) > len(suffix):
            return owner[: -len(suffix)]
        cut = pod_name.rfind(f"{suffix}-")
        if not owner and cut > 0:
            return pod_name[:cut]
    return owner or pod_name


def run_id_for(
    *,
    labels: Mapping[str, object],
    run_labels: tuple[str, ...],
    owner: str,
    pod_name: str,
    hash_labels: tuple[str, ...] = TEMPLATE_HASH_LABELS,
) -> str:
    """The first run label present (`finops.io/run`, then the Job name), else the workload
    (the controlling owner without its pod-template hash), else the pod."""
    template_hash = label_text(labels, *hash_labels)
    return label_text(labels, *run_labels) or workload_name(
        owner=owner, pod_name=pod_name, template_hash=template_hash
    )


def is_service(
    labels: Mapping[str, object], *, service_labels: tuple[str, ...], endpoint: str
) -> bool:
    """A pod is a service when a service label says "true", or it serves an endpoint."""
    return bool(endpoint) or label_text(labels, *service_labels).lower() == "true"


def account_for(
    *, labels: Mapping[str, object], namespace: str, team_labels: tuple[str, ...]
) -> str:
    return label_text(labels, *team_labels) or namespace


# Times a pod shows (RFC 3339 strings), for the snapshot time of a file: metadata, status,
# conditions and container states. deletionTimestamp is left out: it may lie in the future.
_CONDITION_TIMES = ("lastTransitionTime", "lastProbeTime")


_STATE_TIMES = ("startedAt", "finishedAt")


_STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")


def pod_times(pod: object) -> Iterator[datetime]:
    """Every well-formed time the pod shows (bad ones are the pod reader's to report)."""
    if not isinstance(pod, dict):
        return
    texts: list[object] = [
        _nested(pod, "metadata", "creationTimestamp"),
        _nested(pod, "status", "startTime"),
    ]
    managed = _nested(pod, "metadata", "managedFields")
    texts += [m.get("time") for m in _dicts(managed)]
    conditions = _dicts(_nested(pod, "status", "conditions"))
    texts += [c.get(k) for c in conditions for k in _CONDITION_TIMES]
    for key in _STATUS_LISTS:
        for container in _dicts(_nested(pod, "status", key)):
            for which in ("state", "lastState"):
                states = _nested(container, which)
                for state in _dicts(list(states.values()) if isinstance(states, dict) else []):
                    texts += [state.get(k) for k in _STATE_TIMES]
    for text in texts:
        if isinstance(text, str):
            try:
                yield parse_time(text)
            except ValueError:
                continue


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
