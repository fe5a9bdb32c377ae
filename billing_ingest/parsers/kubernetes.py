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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from billing_ingest.models import JobRecord
from billing_ingest.parsers.kubernetes_fields import (
    ENDPOINT_LABEL,
    RUN_LABELS,
    SERVICE_LABEL,
    TEAM_LABELS,
    _dicts,
    account_for,
    is_service,
    label_text,
    parse_time,
    pod_times,
    run_id_for,
)
from billing_ingest.parsers.kubernetes_files import load_pods
from billing_ingest.parsers.kubernetes_gpus import (
    CLUSTER_REPLICAS,
    NVIDIA_GPU,
    SHARED_GPU_RESOURCE,
    FieldError,
    GpuSharing,
    PodGpus,
    _get,
    _list_of_objects,
    _nested,
    pod_gpus,
    pod_replicas,
    rounded_gpus,
)
from billing_ingest.parsers.rows import END_FROM_SNAPSHOT, JobRow, row_text
from billing_ingest.parsers.slurm import SacctStats
from finops.core.errors import ImportFormatError

DEFAULT_CHUNK_SIZE = 5000


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

# JobRecord fields checked against their max_length before writing: PostgreSQL's error would
# name neither pod nor field.
_BOUNDED = ("job_id", "job_id_raw", "name", "account", "run_id", "namespace", "endpoint", "state")


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


def check_lengths(record: JobRow) -> None:
    for name in _BOUNDED:
        limit = getattr(JobRecord._meta.get_field(name), "max_length", None)
        if limit is not None and len(row_text(record, name)) > limit:
            raise FieldError(name, f"{name} longer than {limit} characters")


# --- one pod ----------------------------------------------------------------------------------


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
    endpoint = label_text(labels, ENDPOINT_LABEL)
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
        "endpoint": endpoint,
        "service": is_service(labels, service_labels=(SERVICE_LABEL,), endpoint=endpoint),
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
