"""OpenCost `/allocation` responses: GPU time per pod, as job records.

Shape: `{"code": 200, "data": [{"<name>": allocation, ...}, ...]}`, one object per window
(`step`). Only allocations that name a pod and a node and have gpuHours > 0 become records;
the rest (namespace-level aggregates, `__idle__`, CPU-only pods) hold no GPU a node bill could be
split by, and are counted as skipped. Query with `aggregate=pod` (or `container`) for records.

A pod's allocations (its containers, and the windows of a multi-window response) are merged
into one record: start = earliest start, end = latest end, gpus = total gpuHours / hours from
start to end, rounded to 6 places. So gpus x duration is the GPU-hours OpenCost reported: the
GPU-seconds attribution charges are OpenCost's own (its numbers carry 5 decimals, so no exact
fraction is kept: gpu_numerator / gpu_denominator stay empty). A pod seen on two nodes (deleted
and recreated under the same name) gets one record per node, its job id suffixed `@<node>`.

OpenCost does not report the pod phase: state is UNKNOWN, and the records carry an end (the
last sample), never "running". Labels are OpenCost's sanitised keys (`finops_io_team` for
`finops.io/team`); run, account and endpoint read either spelling. The run is named as the pod
reader names it (kubernetes.run_id_for): OpenCost's `controller` is already a Deployment's name
(`nginx`, not its ReplicaSet `nginx-7fb78fb6d8`); a ReplicaSet name it reports (older
versions, no kube-state-metrics owner) and a pod without a controller lose the
`pod_template_hash` label's hash alike, so both readers put one workload in one run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from billing_ingest.parsers.kubernetes import check_lengths
from billing_ingest.parsers.kubernetes_fields import (
    ENDPOINT_LABEL,
    RUN_LABELS,
    SERVICE_LABEL,
    TEAM_LABELS,
    TEMPLATE_HASH_LABELS,
    account_for,
    is_service,
    label_text,
    parse_time,
    run_id_for,
)
from billing_ingest.parsers.kubernetes_files import load_json
from billing_ingest.parsers.kubernetes_gpus import GPU_PLACES, FieldError
from billing_ingest.parsers.rows import JobRow
from billing_ingest.parsers.slurm import SacctStats
from finops.core.errors import ImportFormatError

DEFAULT_CHUNK_SIZE = 5000


def sanitised(key: str) -> str:
    """How OpenCost (Prometheus) spells a label key: every non-alphanumeric becomes `_`."""
    return "".join(c if c.isalnum() else "_" for c in key)


def _both(*keys: str) -> tuple[str, ...]:
    return tuple(k for key in keys for k in (key, sanitised(key)))


_TEAM_KEYS = _both(*TEAM_LABELS)
_RUN_KEYS = _both(*RUN_LABELS)
_HASH_KEYS = _both(*TEMPLATE_HASH_LABELS)


@dataclass
class _Pod:
    namespace: str
    pod: str
    node: str
    start: datetime
    end: datetime
    gpu_hours: Decimal
    controller: str
    labels: dict[str, str] = field(default_factory=dict)


def _number(value: object, path: str) -> Decimal:
    if value is None:
        return Decimal(0)
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise FieldError(path, f"expected a number, found {value!r}")
    number = Decimal(value)
    if not number.is_finite() or number < 0:
        raise FieldError(path, f"expected a non-negative number, found {value!r}")
    return number


def _text(properties: dict[str, Any], key: str) -> str:
    value = properties.get(key)
    return value.strip() if isinstance(value, str) else ""


def _time(value: object, path: str) -> datetime:
    try:
        return parse_time(value)
    except ValueError as exc:
        raise FieldError(path, str(exc)) from None


def _allocation(allocation: dict[str, Any], path: str) -> _Pod | None:
    properties = allocation.get("properties")
    if not isinstance(properties, dict):
        return None
    namespace, pod, node = (_text(properties, k) for k in ("namespace", "pod", "node"))
    gpu_hours = _number(allocation.get("gpuHours"), f"{path}.gpuHours")
    if not (namespace and pod and node) or gpu_hours <= 0:
        return None
    start = _time(allocation.get("start"), f"{path}.start")
    end = _time(allocation.get("end"), f"{path}.end")
    if end <= start:
        raise FieldError(f"{path}.end", f"end {end.isoformat()} is not after start")
    labels = properties.get("labels")
    labels = (
        {k: v for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, dict) else {}
    )
    return _Pod(
        namespace, pod, node, start, end, gpu_hours, _text(properties, "controller"), labels
    )


def _merge(pods: dict[tuple[str, str, str], _Pod], found: _Pod) -> None:
    key = (found.namespace, found.pod, found.node)
    seen = pods.get(key)
    if seen is None:
        pods[key] = found
        return
    seen.start = min(seen.start, found.start)
    seen.end = max(seen.end, found.end)
    seen.gpu_hours += found.gpu_hours
    seen.labels.update(found.labels)
    seen.controller = seen.controller or found.controller


def _record(pod: _Pod, job_id: str) -> JobRow:
    seconds = Decimal(int((pod.end - pod.start).total_seconds()))
    gpus = (pod.gpu_hours * 3600 / seconds).quantize(GPU_PLACES)
    labels = pod.labels
    endpoint = label_text(labels, *_both(ENDPOINT_LABEL))
    record: JobRow = {
        "job_id": job_id,
        "job_id_raw": "",
        "name": pod.pod,
        "account": account_for(labels=labels, namespace=pod.namespace, team_labels=_TEAM_KEYS),
        "user": "",
        "partition": "",
        "state": "UNKNOWN",
        "start": pod.start,
        "end": pod.end,
        "gpus": gpus,
        "gpu_numerator": None,
        "gpu_denominator": None,
        "nodes": [pod.node],
        "run_id": run_id_for(
            labels=labels,
            run_labels=_RUN_KEYS,
            owner=pod.controller,
            pod_name=pod.pod,
            hash_labels=_HASH_KEYS,
        ),
        "wckey": "",
        "comment": "",
        "namespace": pod.namespace,
        "labels": labels,
        "endpoint": endpoint,
        "service": is_service(labels, service_labels=_both(SERVICE_LABEL), endpoint=endpoint),
    }
    check_lengths(record)
    return record


def _windows(document: Any, file_label: str) -> list[tuple[str, dict[str, Any]]]:
    data = document.get("data") if isinstance(document, dict) else None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ImportFormatError(
            "expected an OpenCost /allocation response: an object with a `data` array",
            file=file_label,
            column="data",
        )
    windows = []
    for i, window in enumerate(data):
        if window is None:
            continue  # OpenCost prints null for a window with no data
        if not isinstance(window, dict):
            raise ImportFormatError(
                "expected an object of allocations", file=file_label, column=f"data[{i}]"
            )
        windows.append((f"data[{i}]", window))
    return windows


def parse_allocations(
    path: Path,
    *,
    file_label: str,
    stats: SacctStats | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[list[JobRow]]:
    """Yield chunks of dicts keyed by JobRecord field names (without batch and cluster).

    `stats`: allocations read (data_rows), records (jobs), allocations skipped for having no
    pod, node or GPU hours (skipped_not_started). Errors name the file and the JSON path.
    """
    stats = stats if stats is not None else SacctStats()
    document = load_json(path, file_label)
    pods: dict[tuple[str, str, str], _Pod] = {}
    for w_path, window in _windows(document, file_label):
        for name, allocation in window.items():
            a_path = f"{w_path}.{name}"
            stats.data_rows += 1
            if not isinstance(allocation, dict):
                raise ImportFormatError(
                    "expected an allocation object", file=file_label, column=a_path
                )
            try:
                found = _allocation(allocation, a_path)
            except FieldError as exc:
                raise ImportFormatError(str(exc), file=file_label, column=exc.path) from None
            if found is None:
                stats.skipped_not_started += 1
                continue
            _merge(pods, found)
    nodes_per_pod: dict[tuple[str, str], int] = {}
    for namespace, pod_name, _ in pods:
        nodes_per_pod[(namespace, pod_name)] = nodes_per_pod.get((namespace, pod_name), 0) + 1
    chunk: list[JobRow] = []
    for (namespace, pod_name, node), pod in pods.items():
        job_id = f"{namespace}/{pod_name}"
        if nodes_per_pod[(namespace, pod_name)] > 1:
            job_id = f"{job_id}@{node}"
        try:
            chunk.append(_record(pod, job_id))
        except FieldError as exc:
            raise ImportFormatError(
                f"pod {job_id}: {exc}", file=file_label, column=exc.path
            ) from None
        stats.jobs += 1
        if len(chunk) >= chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
