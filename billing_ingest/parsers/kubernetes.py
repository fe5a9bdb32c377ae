"""Kubernetes pods: the JSON `kubectl get pods -A -o json` prints (a `List` of pods).

One JobRecord per pod that was scheduled and started: job id `<namespace>/<name>` (unique per
cluster), the node it ran on, start = status.startTime, end = the latest finishedAt of its
terminated containers once the pod is over (phase Succeeded/Failed), else None (running: cost
to date). Unscheduled pods (no spec.nodeName) and pods not started yet (no status.startTime)
hold nothing and are skipped.

GPUs are exact fractions (DESIGN section 5.3): per container, `resources.limits` (else
`requests`; Kubernetes requires them equal for extended resources) of
- `nvidia.com/gpu` and `amd.com/gpu`: whole GPUs;
- `nvidia.com/mig-<N>g.<M>gb` (mixed MIG strategy): N/7 of a GPU (A100/H100/H200 have 7 compute
  slices); the A30 profiles 1g.6gb, 2g.12gb, 4g.24gb are N/4 (4 slices); a compute-instance
  profile `mig-<C>c.<N>g.<M>gb` is C/7;
- `nvidia.com/gpu.shared` (time-slicing with renameByDefault): 1/replicas, replicas being the
  cluster's `gpu_sharing_replicas` (the pod list does not carry the node label
  `nvidia.com/gpu.replicas`).
Containers are combined per resource as the scheduler does: max(sum of app containers and
sidecars (init containers with restartPolicy Always), each regular init container plus the
sidecars started before it). Init containers run one after another before the app containers,
so they never add to them: a GPU-holding init container counts only when it holds more than the
app containers (max, not sum). The record keeps `gpus` rounded to 6 places and the exact value
as gpu_numerator / gpu_denominator.

Run: label `finops.io/run`, else the Kubernetes Job's `job-name` label, else the controlling
owner's name, else the pod name. Account: label `finops.io/team`, else `team`, else the
namespace. Endpoint: label `finops.io/endpoint`.

The file is read whole (json.load): a 100k-pod dump is a few hundred MB of JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from billing_ingest.errors import ImportFormatError
from billing_ingest.models import JobRecord
from billing_ingest.parsers.bounds import json_loads
from billing_ingest.parsers.rows import JobRow, row_text
from billing_ingest.parsers.slurm import SacctStats

DEFAULT_CHUNK_SIZE = 5000
GPU_PLACES = Decimal("0.000001")
_CTX = Context(prec=50)

WHOLE_GPU_RESOURCES = frozenset({"nvidia.com/gpu", "amd.com/gpu"})
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
# `nvidia.com/mig-3g.40gb`, `nvidia.com/mig-1c.3g.20gb`, `nvidia.com/mig-1g.10gb.me` (media ext.).
_MIG = re.compile(r"nvidia\.com/mig-(?:(\d+)c\.)?(\d+)g\.(\d+)gb(?:\.[a-z0-9]+)*")
MIG_SLICES = 7
# A30: 4 compute slices; its profiles are the only ones with these names.
_A30_PROFILES = frozenset({(1, 6), (2, 12), (4, 24)})
A30_SLICES = 4

RUN_LABEL = "finops.io/run"
TEAM_LABELS = ("finops.io/team", "team")
ENDPOINT_LABEL = "finops.io/endpoint"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
RUN_LABELS = (RUN_LABEL, *JOB_NAME_LABELS)
# Pods killed from outside (eviction, preemption): their GPU time is lost work.
_PREEMPTED_REASONS = frozenset({"Evicted", "Preempting"})
_STATES = {"Succeeded": "COMPLETED", "Failed": "FAILED", "Running": "RUNNING", "Pending": "PENDING"}
_FINISHED = frozenset({"Succeeded", "Failed"})

# JobRecord fields checked against their max_length before writing: PostgreSQL's error would
# name neither pod nor field.
_BOUNDED = ("job_id", "job_id_raw", "name", "account", "run_id", "namespace", "endpoint", "state")


class FieldError(ValueError):
    """A bad value at a JSON path inside one pod; the parser adds file and item index."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass
class PodGpus:
    """What a pod holds, before it is written: the exact GPU count and the resources behind it."""

    gpus: Fraction = Fraction(0)
    resources: dict[str, int] = field(default_factory=dict)


# --- value helpers (pure) ---------------------------------------------------------------------


def gpu_fraction(resource: str, *, shared_replicas: int) -> Fraction | None:
    """GPUs one unit of a resource is, or None when the resource is not a GPU."""
    if resource in WHOLE_GPU_RESOURCES:
        return Fraction(1)
    if resource == SHARED_GPU_RESOURCE:
        return Fraction(1, shared_replicas)
    match = _MIG.fullmatch(resource)
    if match is None:
        return None
    compute, slices, memory = match.group(1), int(match.group(2)), int(match.group(3))
    total = A30_SLICES if (slices, memory) in _A30_PROFILES else MIG_SLICES
    if slices < 1 or slices > total:
        raise ValueError(f"MIG profile {resource!r} has {slices} of {total} slices")
    used = int(compute) if compute is not None else slices
    if used < 1 or used > slices:
        raise ValueError(f"MIG profile {resource!r} has {used} compute slices of {slices}")
    return Fraction(used, total)


def quantity(value: object) -> int:
    """An extended-resource quantity: Kubernetes only allows whole numbers ("2" or 2)."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise ValueError(f"not a whole-number quantity: {value!r}")
    if number < 0:
        raise ValueError(f"negative quantity: {value!r}")
    return number


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


def rounded_gpus(gpus: Fraction) -> Decimal:
    """The 6-place value stored in JobRecord.gpus (the exact one is kept beside it)."""
    exact = _CTX.divide(Decimal(gpus.numerator), Decimal(gpus.denominator))
    return exact.quantize(GPU_PLACES, rounding=ROUND_HALF_EVEN)


def label_text(labels: Mapping[str, object], *keys: str) -> str:
    for key in keys:
        value = labels.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def run_id_for(
    *, labels: Mapping[str, object], run_labels: tuple[str, ...], owner: str, pod_name: str
) -> str:
    """The first run label present (`finops.io/run`, then the Job name), else the controlling
    owner, else the pod."""
    return label_text(labels, *run_labels) or owner or pod_name


def account_for(
    *, labels: Mapping[str, object], namespace: str, team_labels: tuple[str, ...]
) -> str:
    return label_text(labels, *team_labels) or namespace


def check_lengths(record: JobRow) -> None:
    for name in _BOUNDED:
        limit = getattr(JobRecord._meta.get_field(name), "max_length", None)
        if limit is not None and len(row_text(record, name)) > limit:
            raise FieldError(name, f"{name} longer than {limit} characters")


# --- one pod ----------------------------------------------------------------------------------


def _get(obj: Mapping[str, Any], key: str, path: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    if value is not None and not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise FieldError(f"{path}.{key}", f"expected {expected}, found {type(value).__name__}")
    return value


def _list_of_objects(obj: Mapping[str, Any], key: str, path: str) -> list[tuple[str, dict]]:
    items = _get(obj, key, path, list) or []
    result = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise FieldError(f"{path}.{key}[{i}]", "expected an object")
        result.append((f"{path}.{key}[{i}]", item))
    return result


def _container_resources(container: dict[str, Any], path: str) -> dict[str, int]:
    resources = _get(container, "resources", path, dict) or {}
    limits = _get(resources, "limits", f"{path}.resources", dict) or {}
    requests = _get(resources, "requests", f"{path}.resources", dict) or {}
    held: dict[str, int] = {}
    for source, where in ((requests, "requests"), (limits, "limits")):
        # limits are read last: they win where both are given.
        for name, value in source.items():
            if _is_gpu_resource(name):
                try:
                    gpu_fraction(name, shared_replicas=1)  # a bad MIG profile fails here
                    held[name] = quantity(value)
                except ValueError as exc:
                    raise FieldError(f"{path}.resources.{where}.{name}", str(exc)) from None
    return held


def _is_gpu_resource(name: str) -> bool:
    return (
        name in WHOLE_GPU_RESOURCES
        or name == SHARED_GPU_RESOURCE
        or name.startswith("nvidia.com/mig-")
    )


def pod_gpus(spec: dict[str, Any], path: str, *, shared_replicas: int) -> PodGpus:
    """GPUs a pod holds for its lifetime (module docstring: max, not sum, for init containers)."""
    app: dict[str, int] = {}
    for c_path, container in _list_of_objects(spec, "containers", path):
        for name, count in _container_resources(container, c_path).items():
            app[name] = app.get(name, 0) + count
    sidecars: dict[str, int] = {}
    peak_init: dict[str, int] = {}
    for c_path, container in _list_of_objects(spec, "initContainers", path):
        held = _container_resources(container, c_path)
        if container.get("restartPolicy") == "Always":
            # A sidecar runs beside everything started after it.
            for name, count in held.items():
                sidecars[name] = sidecars.get(name, 0) + count
            continue
        for name in set(held) | set(sidecars):
            during = held.get(name, 0) + sidecars.get(name, 0)
            peak_init[name] = max(peak_init.get(name, 0), during)
    effective: dict[str, int] = {}
    for name in set(app) | set(sidecars) | set(peak_init):
        count = max(app.get(name, 0) + sidecars.get(name, 0), peak_init.get(name, 0))
        if count:
            effective[name] = count
    gpus = Fraction(0)
    for name, count in effective.items():
        unit = gpu_fraction(name, shared_replicas=shared_replicas)
        if unit is not None:
            gpus += unit * count
    return PodGpus(gpus=gpus, resources=dict(sorted(effective.items())))


def _terminations(status: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """(path, state.terminated) of every container status that has one."""
    found = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for s_path, container in _list_of_objects(status, key, path):
            state = _get(container, "state", s_path, dict) or {}
            terminated = _get(state, "terminated", f"{s_path}.state", dict)
            if terminated is not None:
                found.append((f"{s_path}.state.terminated", terminated))
    return found


def pod_state(status: dict[str, Any], terminations: list[tuple[str, dict[str, Any]]]) -> str:
    phase = status.get("phase") or "Unknown"
    if phase == "Succeeded":
        return "COMPLETED"
    if status.get("reason") in _PREEMPTED_REASONS or _disrupted(status):
        return "PREEMPTED"
    if phase == "Failed":
        if any(t.get("reason") == "OOMKilled" for _, t in terminations):
            return "OUT_OF_MEMORY"
        if status.get("reason") == "DeadlineExceeded":
            return "TIMEOUT"  # activeDeadlineSeconds: like Slurm's wall-clock limit
        return "FAILED"
    return _STATES.get(str(phase), "UNKNOWN")


def _disrupted(status: dict[str, Any]) -> bool:
    """A terminal pod with the DisruptionTarget condition was preempted, drained or evicted."""
    if status.get("phase") != "Failed":
        return False
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in conditions
    )


def pod_end(
    status: dict[str, Any], terminations: list[tuple[str, dict[str, Any]]], path: str
) -> datetime | None:
    """Latest container finishedAt of a finished pod; None while the pod runs.

    An evicted pod may have no terminated container status; the time its last condition changed
    (Ready turning False) is when it stopped holding the node.
    """
    if status.get("phase") not in _FINISHED:
        return None
    ends = []
    for t_path, terminated in terminations:
        if terminated.get("finishedAt") is not None:
            ends.append(_at(terminated["finishedAt"], f"{t_path}.finishedAt"))
    if not ends:
        for c_path, condition in _list_of_objects(status, "conditions", path):
            if condition.get("lastTransitionTime") is not None:
                value = condition["lastTransitionTime"]
                ends.append(_at(value, f"{c_path}.lastTransitionTime"))
    return max(ends) if ends else None


def _at(value: object, path: str) -> datetime:
    try:
        return parse_time(value)
    except ValueError as exc:
        raise FieldError(path, str(exc)) from None


def _owner_name(metadata: dict[str, Any], path: str) -> str:
    owners = _list_of_objects(metadata, "ownerReferences", path)
    controllers = [o for _, o in owners if o.get("controller") is True] or [o for _, o in owners]
    for owner in controllers:
        name = owner.get("name")
        if isinstance(name, str) and name:
            return name
    return ""


def _string_map(obj: dict[str, Any], key: str, path: str) -> dict[str, str]:
    value = _get(obj, key, path, dict) or {}
    for name, text in value.items():
        if not isinstance(text, str):
            raise FieldError(f"{path}.{key}.{name}", "expected a string")
    return dict(value)


def _required_text(obj: dict[str, Any], key: str, path: str) -> str:
    value = _get(obj, key, path, str)
    if not value or not value.strip():
        raise FieldError(f"{path}.{key}", "missing")
    return value.strip()


def pod_record(pod: dict[str, Any], path: str, *, shared_replicas: int) -> JobRow | None:
    """The JobRecord fields of one pod (without batch and cluster), or None when it never ran."""
    metadata = _get(pod, "metadata", path, dict)
    if metadata is None:
        raise FieldError(f"{path}.metadata", "missing")
    m_path = f"{path}.metadata"
    namespace = _required_text(metadata, "namespace", m_path)
    name = _required_text(metadata, "name", m_path)
    spec = _get(pod, "spec", path, dict) or {}
    status = _get(pod, "status", path, dict) or {}
    node = _get(spec, "nodeName", f"{path}.spec", str)
    start_text = status.get("startTime")
    if not node or start_text is None:
        return None  # unscheduled, or bound but not started by the kubelet yet
    start = _at(start_text, f"{path}.status.startTime")
    terminations = _terminations(status, f"{path}.status")
    end = pod_end(status, terminations, f"{path}.status")
    if status.get("phase") in _FINISHED and (end is None or end < start):
        # A finished pod with no time at all, or containers "finishing" before the pod started
        # (clock skew between kubelet and API server): nothing measurable was held. Never
        # None, which would charge a finished pod as running to the end of the month.
        end = start
    held = pod_gpus(spec, f"{path}.spec", shared_replicas=shared_replicas)
    labels = _string_map(metadata, "labels", m_path)
    record: JobRow = {
        "job_id": f"{namespace}/{name}",
        "job_id_raw": str(metadata.get("uid") or ""),
        "name": name,
        "account": account_for(labels=labels, namespace=namespace, team_labels=TEAM_LABELS),
        "user": "",
        "partition": "",
        "state": pod_state(status, terminations),
        "start": start,
        "end": end,
        "gpus": rounded_gpus(held.gpus),
        "gpu_numerator": held.gpus.numerator,
        "gpu_denominator": held.gpus.denominator,
        "nodes": [node.strip()],
        "run_id": run_id_for(
            labels=labels,
            owner=_owner_name(metadata, m_path),
            pod_name=name,
            run_labels=RUN_LABELS,
        ),
        "wckey": "",
        "comment": "",
        "namespace": namespace,
        "labels": labels,
        "endpoint": label_text(labels, ENDPOINT_LABEL),
    }
    check_lengths(record)
    return record


# --- the file parser --------------------------------------------------------------------------


def load_json(path: Path, file_label: str) -> Any:
    """The whole file as JSON (numbers with a fraction as Decimal), or ImportFormatError naming
    line and column."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            # Nesting bounded (FINOPS_MAX_JSON_DEPTH) before json.loads recurses through it.
            return json_loads(handle.read(), file_label=file_label, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            file=file_label,
            row=exc.lineno,
        ) from None
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=file_label) from None


def pod_items(document: Any, file_label: str) -> list[Any]:
    if not isinstance(document, dict):
        raise ImportFormatError(
            "expected a JSON object (`kubectl get pods -A -o json` prints a List)",
            file=file_label,
        )
    kind = document.get("kind")
    if kind == "Pod":
        return [document]
    items = document.get("items")
    if kind not in ("List", "PodList") or not isinstance(items, list):
        raise ImportFormatError(
            f"expected kind List or PodList with an `items` array, found kind {kind!r}",
            file=file_label,
            column="kind",
        )
    return items


def parse_pods(
    path: Path,
    *,
    file_label: str,
    gpu_sharing_replicas: int = 1,
    stats: SacctStats | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[list[JobRow]]:
    """Yield chunks of dicts keyed by JobRecord field names (without batch and cluster).

    Raises ImportFormatError naming the file and the JSON path (`items[3].status.startTime`).
    `stats` counts pods read (data_rows), stored (jobs) and skipped as not started
    (skipped_not_started: unscheduled or not yet started).
    """
    if gpu_sharing_replicas < 1:
        raise ValueError("gpu_sharing_replicas must be at least 1")
    stats = stats if stats is not None else SacctStats()
    items = pod_items(load_json(path, file_label), file_label)
    chunk: list[JobRow] = []
    for index, pod in enumerate(items):
        item_path = f"items[{index}]"
        stats.data_rows += 1
        if not isinstance(pod, dict):
            raise ImportFormatError("expected a pod object", file=file_label, column=item_path)
        try:
            record = pod_record(pod, item_path, shared_replicas=gpu_sharing_replicas)
        except FieldError as exc:
            raise ImportFormatError(
                f"{_pod_label(pod)}: {exc}", file=file_label, column=exc.path
            ) from None
        if record is None:
            stats.skipped_not_started += 1
            continue
        stats.jobs += 1
        chunk.append(record)
        if len(chunk) >= chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _pod_label(pod: dict[str, Any]) -> str:
    metadata = pod.get("metadata")
    if isinstance(metadata, dict):
        return f"pod {metadata.get('namespace', '?')}/{metadata.get('name', '?')}"
    return "pod"
