"""Kubernetes pods: what `kubectl get pods -A -o json` (or `-o yaml`) prints (a `List` of pods).

One JobRecord per pod that was scheduled and started: job id `<namespace>/<name>` (unique per
cluster), the node it ran on, start = status.startTime, end = the latest finishedAt of its
terminated containers once the pod is over (phase Succeeded/Failed), else None (running: cost
to date). Unscheduled pods (no spec.nodeName) and pods not started yet (no status.startTime)
hold nothing and are skipped. Two kinds of pod end at the snapshot time, the last time the pod
was seen, and are counted in the import summary (ImportBatch.notes):
- phase Unknown (the node stopped reporting): no end is known, and "running" would charge it to
  date for as long as the record stands;
- an evicted pod whose status keeps no container or condition time (older kubelets): its
  deletion time when it has one, else the snapshot time (never its start: that held nothing).
The snapshot time is the moment the API was read (billing_ingest/services/kubernetes.py passes
it); a file from kubectl does not carry it, so it is the latest time the file itself shows
(creation, start, condition, container and managed-field times), which is never later than the
moment kubectl ran.

GPUs are exact fractions (DESIGN section 5.3): per container, `resources.limits` (else
`requests`; Kubernetes requires them equal for extended resources) of
- `nvidia.com/gpu`: a GPU, or 1/replicas of one on a time-sliced node (below); `amd.com/gpu`:
  a whole GPU;
- `nvidia.com/mig-<N>g.<M>gb` (mixed MIG strategy): N/7 of a GPU (A100/H100/H200 have 7 compute
  slices); the A30 profiles 1g.6gb, 2g.12gb, 4g.24gb are N/4 (4 slices); a compute-instance
  profile `mig-<C>c.<N>g.<M>gb` is C/7;
- `nvidia.com/gpu.shared` (time-slicing with renameByDefault): 1/replicas.
Time-slicing: NVIDIA's device plugin advertises each GPU `replicas` times, as
`nvidia.com/gpu.shared` only with renameByDefault (opt-in), by default under the plain
`nvidia.com/gpu`; GKE's time-sharing and MPS node pools do the same. The pod list does not
carry the node's labels, so a pod's replicas are, first found: the node label the pod selects
(nodeSelector, or a required node affinity naming one value) `nvidia.com/gpu.replicas` (GPU
Feature Discovery) or GKE's `cloud.google.com/gke-max-shared-clients-per-gpu`; the node pool's
(GpuSharing.pools: node-name prefix -> replicas, the longest matching prefix); the cluster's
`gpu_sharing_replicas`. On a node the file shows holding `nvidia.com/gpu.shared`, the plugin
renames its replicas, so `nvidia.com/gpu` there is whole. The summary counts the pods divided,
and warns when replicas are set but no GPU pod was divided, or when `nvidia.com/gpu` was divided by
the cluster's replicas in a file that shows `nvidia.com/gpu.shared` on other nodes
(renameByDefault is usually cluster-wide: whole-GPU pools then want their own replicas, 1).
Containers are combined per resource as the scheduler does: max(sum of app containers and
sidecars (init containers with restartPolicy Always), each regular init container plus the
sidecars started before it). Init containers run one after another before the app containers,
so they never add to them: a GPU-holding init container counts only when it holds more than the
app containers (max, not sum). The record keeps `gpus` rounded to 6 places and the exact value
as gpu_numerator / gpu_denominator.

Run: label `finops.io/run`, else the Kubernetes Job's `job-name` label, else the workload: the
controlling owner's name without the pod-template hash (a Deployment's ReplicaSet
`nginx-7fb78fb6d8` is the Deployment `nginx`, the pod's `pod-template-hash` label telling the
hash; Argo Rollouts' `rollouts-pod-template-hash` alike), which is what OpenCost calls the
pod's controller, so one workload is one run across rollouts and in both readers; else the pod
name (without `-<hash>-<suffix>` when the pod has a template hash). Account: label
`finops.io/team`, else `team`, else the namespace. Endpoint: label `finops.io/endpoint`.

The file is read whole (json.load; YAML with PyYAML's safe loader, its C version where built):
a 100k-pod dump is a few hundred MB of JSON. YAML reads some 20 times slower in 30 times its size
of memory, so it is read up to YAML_MAX_BYTES and JSON asked for past that. YAML anchors and
aliases are refused (kubectl never writes them; an alias "bomb" would expand exponentially) and
merge keys are read as plain keys.
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

import yaml

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover (PyYAML built without libyaml)
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

from billing_ingest.models import JobRecord
from billing_ingest.parsers.bounds import json_loads
from billing_ingest.parsers.rows import END_FROM_SNAPSHOT, JobRow, row_text
from billing_ingest.parsers.slurm import SacctStats
from finops.core.errors import ImportFormatError

DEFAULT_CHUNK_SIZE = 5000
GPU_PLACES = Decimal("0.000001")
_CTX = Context(prec=50)

NVIDIA_GPU = "nvidia.com/gpu"
WHOLE_GPU_RESOURCES = frozenset({NVIDIA_GPU, "amd.com/gpu"})
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
# What a time-sliced node advertises: the plain name by default, `.shared` with renameByDefault.
TIME_SLICED_RESOURCES = frozenset({NVIDIA_GPU, SHARED_GPU_RESOURCE})
# Node labels that tell a node's replicas per GPU, when a pod selects its node by one: GPU
# Feature Discovery's, and GKE's for time-sharing and MPS node pools.
GFD_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GKE_STRATEGY_LABEL = "cloud.google.com/gke-gpu-sharing-strategy"
GKE_CLIENTS_LABEL = "cloud.google.com/gke-max-shared-clients-per-gpu"
GKE_SHARING_STRATEGIES = frozenset({"time-sharing", "mps"})
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
# The hash a Deployment (or an Argo Rollout) appends to its ReplicaSet's name and labels the
# pods with.
TEMPLATE_HASH_LABELS = ("pod-template-hash", "rollouts-pod-template-hash")
# Pods killed from outside (eviction, preemption): their GPU time is lost work.
_PREEMPTED_REASONS = frozenset({"Evicted", "Preempting"})
_STATES = {"Succeeded": "COMPLETED", "Failed": "FAILED", "Running": "RUNNING", "Pending": "PENDING"}
_FINISHED = frozenset({"Succeeded", "Failed"})
UNKNOWN_PHASE = "Unknown"
EVICTED = "Evicted"

# Import summary notes (ImportBatch.notes: note -> pods). `{time}` is the snapshot time, `{how}`
# where it came from.
NOTE_UNKNOWN_ENDED = "pods in phase Unknown (node lost) ended at the snapshot time {time} ({how})"
NOTE_EVICTED_SNAPSHOT = (
    "evicted pods without container or condition times ended at the snapshot time {time} ({how})"
)
NOTE_EVICTED_DELETED = (
    "evicted pods without container or condition times ended at their deletion time"
)
NOTE_DIVIDED = (
    "pods holding {resource} on GPUs time-sliced {replicas} ways ({source}): "
    "1/{replicas} of a GPU each"
)
WARNING_NOT_DIVIDED = (
    "warning: GPU sharing replicas are set ({settings}) but no pod's GPUs were divided by them: "
    "no pod holds nvidia.com/gpu or nvidia.com/gpu.shared on a time-sliced node (check the "
    "node-pool prefixes against the node names); counted: pods holding GPUs"
)
WARNING_RENAMED = (
    "warning: this file shows nvidia.com/gpu.shared (the device plugin's renameByDefault, with "
    "which nvidia.com/gpu is a whole GPU), yet pods' nvidia.com/gpu were divided by the "
    "cluster's {replicas} replicas; give the whole-GPU node pools --gpu-sharing-pool PREFIX=1"
)
# Where the snapshot time came from; what set a pod's replicas when no label or pool did.
SNAPSHOT_READ = "when the API was read"
SNAPSHOT_LATEST = "the latest time the file shows"
CLUSTER_REPLICAS = "the cluster's replicas"

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

    def divided(self, replicas: int, *, renamed: bool = False) -> list[str]:
        """The time-sliced resources the pod holds that `replicas` divide (on a `renamed` node
        only `nvidia.com/gpu.shared`)."""
        if replicas <= 1:
            return []
        sliced = {SHARED_GPU_RESOURCE} if renamed else TIME_SLICED_RESOURCES
        return sorted(name for name in self.resources if name in sliced)


@dataclass(frozen=True)
class GpuSharing:
    """How many ways the cluster's GPUs are time-sliced: `replicas` for every node, unless the
    node's name starts with a `pools` prefix (node pool -> replicas; the longest prefix wins)."""

    replicas: int = 1
    pools: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for where, value in (("cluster", self.replicas), *self.pools.items()):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GPU sharing replicas of {where} must be at least 1: {value!r}")

    @property
    def any_set(self) -> bool:
        return self.replicas > 1 or any(n > 1 for n in self.pools.values())

    def describe(self) -> str:
        pools = ", ".join(f"node pool {p}*: {n}" for p, n in sorted(self.pools.items()))
        return f"cluster: {self.replicas}" + (f", {pools}" if pools else "")

    def for_node(self, node: str) -> tuple[int, str]:
        """(replicas, what says so) for a pod on `node` that selects no sharing label."""
        matches = [prefix for prefix in self.pools if node.startswith(prefix)]
        if matches:
            prefix = max(matches, key=len)
            return self.pools[prefix], f"node pool {prefix}*"
        return self.replicas, CLUSTER_REPLICAS


class SnapshotClock:
    """The snapshot time, worked out once and only when a pod needs it: the time given, else
    the latest time found in the file's pods."""

    def __init__(self, given: datetime | None, items: list[Any]) -> None:
        self._time = given
        self._items = items
        self.how = SNAPSHOT_READ if given is not None else SNAPSHOT_LATEST

    def time(self) -> datetime | None:
        if self._time is None:
            self._time = max((t for item in self._items for t in pod_times(item)), default=None)
        return self._time

    def text(self) -> str:
        found = self.time()
        return found.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if found else "unknown"


@dataclass
class PodContext:
    """What reading one pod needs beyond the pod: the sharing settings, the snapshot time, and
    the summary counts it adds to."""

    sharing: GpuSharing = field(default_factory=GpuSharing)
    clock: SnapshotClock = field(default_factory=lambda: SnapshotClock(None, []))
    notes: dict[str, int] = field(default_factory=dict)
    # Nodes the file shows holding nvidia.com/gpu.shared (renameByDefault): nvidia.com/gpu is
    # never a replica there.
    renamed_nodes: frozenset[str] = frozenset()
    # Pods holding GPUs; pods holding nvidia.com/gpu.shared; pods whose nvidia.com/gpu the
    # cluster-wide replicas divided.
    gpu_pods: int = 0
    divided_pods: int = 0
    renamed_pods: int = 0
    cluster_divided_pods: int = 0

    def note(self, text: str) -> None:
        self.notes[text] = self.notes.get(text, 0) + 1


# --- value helpers (pure) ---------------------------------------------------------------------


def gpu_fraction(resource: str, *, shared_replicas: int) -> Fraction | None:
    """GPUs one unit of a resource is, or None when the resource is not a GPU. On a time-sliced
    node (`shared_replicas` > 1) `nvidia.com/gpu` is a replica too, as `.shared` is."""
    if resource in TIME_SLICED_RESOURCES:
        return Fraction(1, shared_replicas)
    if resource in WHOLE_GPU_RESOURCES:
        return Fraction(1)
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


def _list_of_objects(
    obj: Mapping[str, Any], key: str, path: str
) -> list[tuple[str, dict[str, Any]]]:
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


def pod_gpus(
    spec: dict[str, Any], path: str, *, shared_replicas: int, renamed: bool = False
) -> PodGpus:
    """GPUs a pod holds for its lifetime (module docstring: max, not sum, for init containers).
    On a `renamed` node (renameByDefault: its replicas are `nvidia.com/gpu.shared`),
    `nvidia.com/gpu` is a whole GPU."""
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
        whole = renamed and name == NVIDIA_GPU
        unit = gpu_fraction(name, shared_replicas=1 if whole else shared_replicas)
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
    value: str | None = _get(obj, key, path, str)
    if not value or not value.strip():
        raise FieldError(f"{path}.{key}", "missing")
    return value.strip()


def pod_record(pod: dict[str, Any], path: str, *, context: PodContext) -> JobRow | None:
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
    end, from_snapshot = _pod_end_seen(pod, start, terminations, path, context)
    held = _pod_gpus_counted(spec, node.strip(), f"{path}.spec", context)
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
    if from_snapshot:
        record[END_FROM_SNAPSHOT] = True
    return record


def _pod_end_seen(
    pod: dict[str, Any],
    start: datetime,
    terminations: list[tuple[str, dict[str, Any]]],
    path: str,
    context: PodContext,
) -> tuple[datetime | None, bool]:
    """(end, whether it is the snapshot time of a finished pod), counting in the summary the
    pods ended at the snapshot or deletion time (module docstring)."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase == UNKNOWN_PHASE:
        context.note(_clock_note(NOTE_UNKNOWN_ENDED, context.clock))
        return _not_before(context.clock.time(), start), False
    end = pod_end(status, terminations, f"{path}.status")
    if phase not in _FINISHED or end is not None:
        # Containers "finishing" before the pod started (clock skew between kubelet and API
        # server): nothing measurable was held.
        return (max(end, start) if end is not None else None), False
    if status.get("reason") == EVICTED:
        metadata = pod.get("metadata") or {}
        deleted = metadata.get("deletionTimestamp")
        if deleted is not None:
            context.note(NOTE_EVICTED_DELETED)
            return max(_at(deleted, f"{path}.metadata.deletionTimestamp"), start), False
        context.note(_clock_note(NOTE_EVICTED_SNAPSHOT, context.clock))
        return _not_before(context.clock.time(), start), True
    # A finished pod with no time at all (e.g. refused at admission): it held nothing. Never
    # None, which would charge a finished pod as running to the end of the month.
    return start, False


def _not_before(time: datetime | None, start: datetime) -> datetime:
    return start if time is None else max(time, start)


def _clock_note(template: str, clock: SnapshotClock) -> str:
    return template.format(time=clock.text(), how=clock.how)


def _pod_gpus_counted(spec: dict[str, Any], node: str, path: str, context: PodContext) -> PodGpus:
    """The pod's GPUs at its node's time-slicing replicas, counted for the summary."""
    replicas, source = pod_replicas(spec, node, path, context.sharing)
    renamed = node in context.renamed_nodes
    held = pod_gpus(spec, path, shared_replicas=replicas, renamed=renamed)
    if held.gpus:
        context.gpu_pods += 1
    if SHARED_GPU_RESOURCE in held.resources:
        context.renamed_pods += 1
    divided = held.divided(replicas, renamed=renamed)
    context.divided_pods += bool(divided)
    for resource in divided:
        context.note(NOTE_DIVIDED.format(resource=resource, replicas=replicas, source=source))
        if resource == NVIDIA_GPU and source == CLUSTER_REPLICAS:
            context.cluster_divided_pods += 1
    return held


def pod_replicas(
    spec: dict[str, Any], node: str, path: str, sharing: GpuSharing
) -> tuple[int, str]:
    """(replicas per GPU of the pod's node, what says so): a sharing label the pod selects its
    node by, else the node pool's or the cluster's setting."""
    label = GFD_REPLICAS_LABEL
    value, where = selected_node_label(spec, label, path)
    if not value:
        label = GKE_CLIENTS_LABEL
        value, where = selected_node_label(spec, label, path)
        strategy, _ = selected_node_label(spec, GKE_STRATEGY_LABEL, path)
        if strategy and strategy not in GKE_SHARING_STRATEGIES:
            value = ""
    if not value:
        return sharing.for_node(node)
    try:
        replicas = quantity(value)
    except ValueError as exc:
        raise FieldError(where, str(exc)) from None
    if replicas < 1:
        raise FieldError(where, f"GPU sharing replicas must be at least 1: {value!r}")
    return replicas, f"node label {label}={replicas} the pod selects"


def selected_node_label(spec: dict[str, Any], key: str, path: str) -> tuple[str, str]:
    """(value, JSON path) a pod requires of its node's label `key`: its nodeSelector's, else
    the one value every required node-affinity term names with `In`; ("", "") when neither."""
    selector = _get(spec, "nodeSelector", path, dict) or {}
    value = selector.get(key)
    if isinstance(value, str) and value.strip():
        return value.strip(), f"{path}.nodeSelector.{key}"
    terms = _nested(spec, "affinity", "nodeAffinity", REQUIRED_AFFINITY, "nodeSelectorTerms")
    if not isinstance(terms, list) or not terms:
        return "", ""
    found = {_term_value(term, key) for term in terms}
    if len(found) != 1 or "" in found:
        return "", ""
    return found.pop(), f"{path}.affinity.nodeAffinity.{key}"


REQUIRED_AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def _nested(obj: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _term_value(term: object, key: str) -> str:
    expressions = _nested(term, "matchExpressions")
    for expression in expressions if isinstance(expressions, list) else []:
        if not isinstance(expression, dict) or expression.get("key") != key:
            continue
        values = expression.get("values")
        if expression.get("operator") == "In" and isinstance(values, list) and len(values) == 1:
            value = values[0]
            return value.strip() if isinstance(value, str) else ""
    return ""


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


def renamed_nodes(items: list[Any]) -> frozenset[str]:
    """Nodes some pod of the file holds `nvidia.com/gpu.shared` on: their device plugin renames
    its replicas (renameByDefault), so it advertises no time-sliced plain `nvidia.com/gpu`."""
    found = set()
    for item in items:
        spec = _nested(item, "spec")
        node = _nested(spec, "nodeName")
        if not isinstance(node, str) or not node.strip():
            continue
        containers = _dicts(_nested(spec, "containers")) + _dicts(_nested(spec, "initContainers"))
        for c in containers:
            for which in ("limits", "requests"):
                held = _nested(c, "resources", which)
                if isinstance(held, dict) and SHARED_GPU_RESOURCE in held:
                    found.add(node.strip())
    return frozenset(found)


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


# YAML (`kubectl get pods -o yaml`): PyYAML's safe loader (the C one where PyYAML was built with
# libyaml), with times kept as the strings kubectl writes (the pod reader parses them), `<<` read
# as a plain key, and anchors/aliases refused: kubectl never writes them, and a few nested
# aliases or merges expand to billions of nodes ("billion laughs").
_NOT_RESOLVED = frozenset({"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:merge"})


class YamlAliasError(Exception):
    """An alias in a YAML pod list: refused before it is expanded."""

    def __init__(self, mark: Any) -> None:
        super().__init__("alias")
        self.line = int(getattr(mark, "line", 0)) + 1
        self.column = int(getattr(mark, "column", 0)) + 1


class PodYamlLoader(_SafeLoader):
    """Safe loader for pod lists (see above)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _NOT_RESOLVED]
        for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        # An alias is the node it names, met again: refused the first time it is met, before
        # anything is built from it twice.
        if node in self.constructed_objects or node in self.recursive_objects:
            raise YamlAliasError(node.start_mark)
        return super().construct_object(node, deep=deep)


def load_yaml(path: Path, file_label: str) -> list[Any]:
    """The file's YAML documents (one for `kubectl get pods -o yaml`), or ImportFormatError
    naming line and column."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            loader = PodYamlLoader(handle)
            try:
                documents = []
                while loader.check_data():
                    documents.append(loader.get_data())
                return documents
            finally:
                loader.dispose()
    except YamlAliasError as exc:
        raise ImportFormatError(
            "YAML anchors and aliases are not read (kubectl never writes them): the node "
            f"anchored at line {exc.line}, column {exc.column} is used again by an alias",
            file=file_label,
            row=exc.line,
        ) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, file_label) from None
    except RecursionError:
        raise ImportFormatError(
            "YAML nested too deeply to be a pod list", file=file_label
        ) from None
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=file_label) from None


def _yaml_error(exc: yaml.YAMLError, file_label: str) -> ImportFormatError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return ImportFormatError(
        f"not valid YAML: {problem}{where}; export pods with `kubectl get pods -A -o json` "
        "(or `-o yaml`)",
        file=file_label,
        row=mark.line + 1 if mark is not None else None,
    )


def is_json_text(path: Path) -> bool:
    """Whether the file is JSON (its first character, past a BOM and blanks, opens an object or
    array) rather than YAML."""
    with path.open("rb") as handle:
        text = handle.read(_SNIFF).removeprefix(b"\xef\xbb\xbf").lstrip(_BLANKS)
        while not text:
            more = handle.read(_SNIFF)
            if not more:
                return False
            text = more.lstrip(_BLANKS)
    return text[:1] in (b"{", b"[")


_SNIFF = 4096
_BLANKS = b" \t\r\n"


# YAML takes some 20 times JSON's time and 30 times its size in memory while it is read (the
# whole node graph is built first): past this size, JSON is asked for (about 9,000 pods as kubectl
# writes them, some 1 GB while read).
YAML_MAX_BYTES = 32 * 2**20


def load_pods(path: Path, file_label: str) -> list[Any]:
    """The pods of a `kubectl get pods` file, JSON or YAML (a YAML stream's documents, each a
    Pod or a List, one after the other; at most YAML_MAX_BYTES)."""
    if is_json_text(path):
        return pod_items(load_json(path, file_label), file_label)
    size = path.stat().st_size
    if size > YAML_MAX_BYTES:
        raise ImportFormatError(
            f"a YAML pod list of {size / 2**20:.1f} MiB is more than the "
            f"{YAML_MAX_BYTES / 2**20:g} MiB read as YAML; export it with `kubectl get pods -A "
            "-o json`, which reads many times faster in a fraction of the memory",
            file=file_label,
        )
    documents = load_yaml(path, file_label)
    if not documents:
        raise ImportFormatError(_NOT_A_LIST.format(found="an empty file"), file=file_label)
    return [item for document in documents for item in pod_items(document, file_label)]


_NOT_A_LIST = (
    "expected a pod List as `kubectl get pods -A -o json` (or `-o yaml`) prints it, found {found}"
)


def pod_items(document: Any, file_label: str) -> list[Any]:
    if not isinstance(document, dict):
        found = "text" if isinstance(document, str) else f"a {type(document).__name__}"
        raise ImportFormatError(_NOT_A_LIST.format(found=found), file=file_label)
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
    gpu_sharing_pools: Mapping[str, int] | None = None,
    snapshot_time: datetime | None = None,
    stats: SacctStats | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[list[JobRow]]:
    """Yield chunks of dicts keyed by JobRecord field names (without batch and cluster).

    Raises ImportFormatError naming the file and the JSON path (`items[3].status.startTime`).
    `stats` counts pods read (data_rows), stored (jobs) and skipped as not started
    (skipped_not_started: unscheduled or not yet started), and gets the summary notes (pods
    ended at the snapshot time, pods on time-sliced GPUs, warnings). `gpu_sharing_replicas` and
    `gpu_sharing_pools` (node-name prefix -> replicas): GpuSharing. `snapshot_time`: when the
    pods were read, if known (SnapshotClock).
    """
    sharing = GpuSharing(gpu_sharing_replicas, dict(gpu_sharing_pools or {}))
    stats = stats if stats is not None else SacctStats()
    items = load_pods(path, file_label)
    context = PodContext(
        sharing=sharing,
        clock=SnapshotClock(snapshot_time, items),
        renamed_nodes=renamed_nodes(items),
    )
    chunk: list[JobRow] = []
    for index, pod in enumerate(items):
        item_path = f"items[{index}]"
        stats.data_rows += 1
        if not isinstance(pod, dict):
            raise ImportFormatError("expected a pod object", file=file_label, column=item_path)
        try:
            record = pod_record(pod, item_path, context=context)
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
    summary_notes(context, stats.notes)
    if chunk:
        yield chunk


def summary_notes(context: PodContext, notes: dict[str, int]) -> None:
    """Add the file's notes, and its warnings about the sharing settings, to `notes`."""
    found = dict(context.notes)
    if context.sharing.any_set and context.gpu_pods and not context.divided_pods:
        found[WARNING_NOT_DIVIDED.format(settings=context.sharing.describe())] = context.gpu_pods
    if context.renamed_pods and context.cluster_divided_pods:
        warning = WARNING_RENAMED.format(replicas=context.sharing.replicas)
        found[warning] = context.cluster_divided_pods
    for note, count in found.items():
        notes[note] = notes.get(note, 0) + count


def _pod_label(pod: dict[str, Any]) -> str:
    metadata = pod.get("metadata")
    if isinstance(metadata, dict):
        return f"pod {metadata.get('namespace', '?')}/{metadata.get('name', '?')}"
    return "pod"
