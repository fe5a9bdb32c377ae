"""The Kubernetes cluster of the demo: training pods, inference servers, MIG slices, and the
vLLM counters of the servers.

Training jobs come from the same packer as the Slurm clusters (workload.py) and become pods, one
per node (a multi-node job is a PyTorchJob with one worker pod per node), in a namespace per team
with the labels `team` and `finops.io/run`. Two kinds of node are kept out of the packer:
- serving nodes (the first reserved H100 nodes): one `llama-70b-chat` vLLM replica per node,
  8 whole GPUs, replaced when the node goes down for maintenance;
- the MIG node (the first A100 80GB node): each GPU cut into slices (six GPUs as
  3g.40gb + 3g.40gb + 1g.10gb, two as seven 1g.10gb), some slices serving small endpoints for
  the month, the others running notebooks, evals and health checks one after another.

The servers' counters (`vllm:request_success_total`, `vllm:prompt_tokens_total`,
`vllm:generation_tokens_total`) are written as Prometheus `query_range` responses, one file per
endpoint, sampled every 15 minutes while each pod runs; one replica's container restarts
mid-month, so its counters reset to zero.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from fractions import Fraction
from random import Random

from finops.demo.fleet import DAY, HOUR, Month, Node, Pricing
from finops.demo.jobs import Job
from finops.demo.teams import SANDBOX_ACCOUNT, TEAMS

STEP = 900  # seconds between Prometheus samples
# Team slug -> namespace. Pods of the platform team carry no team label: a namespace rule maps
# them; notebooks run in a namespace nobody mapped (its name becomes the team, as in Slurm).
NAMESPACES = {
    "vision": "cv",
    "language": "llm",
    "speech": "speech",
    "recsys": "recsys",
    "platform": "gpu-platform",
    "": SANDBOX_ACCOUNT,
}
_ACCOUNT_TEAM = {account: team.slug for team in TEAMS for account in team.accounts}
_UNLABELLED_TEAMS = ("platform", "")
MIG_3G = "nvidia.com/mig-3g.40gb"
MIG_1G = "nvidia.com/mig-1g.10gb"
WHOLE_GPU = "nvidia.com/gpu"
# Slices per GPU of the MIG node (mixed strategy).
_MIG_LAYOUT = [[MIG_3G, MIG_3G, MIG_1G]] * 6 + [[MIG_1G] * 7] * 2


@dataclass(frozen=True)
class Endpoint:
    name: str
    team: str
    model: str
    resource: str
    count: int  # units of `resource` per replica
    replicas: int  # on the MIG node; llama: one per serving node
    requests_per_hour: int  # per replica at the daily peak
    prompt_tokens: tuple[int, int]
    generation_tokens: tuple[int, int]


ENDPOINTS = (
    Endpoint(
        "llama-70b-chat", "language", "meta-llama/Llama-3.1-70B-Instruct", WHOLE_GPU, 8, 0,
        30_000, (300, 1500), (120, 600),
    ),
    Endpoint(
        "mistral-7b-chat", "language", "mistralai/Mistral-7B-Instruct-v0.3", MIG_3G, 1, 2,
        9_000, (200, 900), (80, 400),
    ),
    Endpoint(
        "whisper-large-v3", "speech", "openai/whisper-large-v3", MIG_3G, 1, 2, 4_000, (40, 120),
        (60, 240),
    ),
    Endpoint(
        "embed-e5-large", "recsys", "intfloat/e5-large-v2", MIG_1G, 1, 3, 60_000, (30, 300),
        (0, 0),
    ),
)  # fmt: skip
ENDPOINT_BY_NAME = {e.name: e for e in ENDPOINTS}


@dataclass
class Pod:
    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    node: str | None
    resources: dict[str, int]
    start: int | None
    end: int | None  # None: running at month end (or never started)
    phase: str  # Succeeded, Failed, Running, Pending
    owner_kind: str
    owner_name: str
    image: str
    reason: str = ""  # status.reason
    exit_code: int = 0
    terminated_reason: str = ""
    disrupted: bool = False
    restart_at: int | None = None  # one container restart (counter reset)
    # A training pod running at month end: when its job would have ended (Job.planned_end).
    planned_end: int | None = None

    @property
    def gpus(self) -> Fraction:
        total = Fraction(0)
        for resource, count in self.resources.items():
            if resource == WHOLE_GPU:
                total += count
            else:  # nvidia.com/mig-<N>g...: N of 7 slices
                total += Fraction(int(resource.split("mig-")[1].split("g")[0]), 7) * count
        return total

    @property
    def endpoint(self) -> str:
        return self.labels.get("finops.io/endpoint", "")


@dataclass
class Series:
    """One endpoint pod's counters: cumulative values per sample time (seconds)."""

    pod: Pod
    endpoint: Endpoint
    times: list[int] = field(default_factory=list)
    requests_stop: list[int] = field(default_factory=list)
    requests_length: list[int] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    generation: list[int] = field(default_factory=list)
    # What the counters say happened, per UTC hour index: (requests, prompt, generation).
    hourly: dict[int, list[int]] = field(default_factory=dict)


def _uid(rng: Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _suffix(rng: Random, length: int = 5) -> str:
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(length))


def serving_nodes(nodes: list[Node]) -> tuple[list[Node], Node | None]:
    """(llama serving nodes, the MIG node): kept out of the training packer."""
    reserved = [n for n in nodes if n.pricing == Pricing.COMMITTED]
    a100 = [
        n for n in nodes if n.instance_type.gpu_model == "a100" and n.pricing == Pricing.STANDARD
    ]
    return reserved[:2], (a100[0] if a100 else None)


# --- training pods ------------------------------------------------------------------------------


def _job_pods(rng: Random, job: Job) -> list[Pod]:
    team = _ACCOUNT_TEAM.get(job.account, "")
    namespace = NAMESPACES[team]
    labels = {"finops.io/run": job.run_id, "app.kubernetes.io/part-of": "training"}
    if team not in _UNLABELLED_TEAMS:
        labels["team"] = team
    if job.service:
        labels["finops.io/service"] = "true"
    if job.state == "CANCELLED" and not job.nodes:
        return []  # deleted before it was scheduled: kubectl no longer lists it
    phase, reason, exit_code, terminated, disrupted = {
        "COMPLETED": ("Succeeded", "", 0, "Completed", False),
        "FAILED": ("Failed", "", 1, "Error", False),
        "CANCELLED": ("Failed", "", 143, "Error", False),
        "TIMEOUT": ("Failed", "DeadlineExceeded", 137, "Error", False),
        "PREEMPTED": ("Failed", "", 143, "Error", True),
        "RUNNING": ("Running", "", 0, "", False),
        "PENDING": ("Pending", "Unschedulable", 0, "", False),
    }[job.state]
    owner = f"{job.run_id}-{job.job_id_raw}"
    hosts: list[str | None] = list(job.nodes) or [None]
    pods = []
    for index, host in enumerate(hosts):
        name = f"{owner}-worker-{index}" if len(hosts) > 1 else f"{owner}-{_suffix(rng)}"
        pods.append(
            Pod(
                namespace=namespace, name=name, uid=_uid(rng),
                labels={**labels, "training.kubeflow.org/job-name": owner},
                node=host, resources={WHOLE_GPU: job.gpus_per_node},
                start=job.start if host else None, end=job.end if host else None,
                phase=phase, owner_kind="PyTorchJob" if len(hosts) > 1 else "Job",
                owner_name=owner, image="nvcr.io/nvidia/pytorch:24.09-py3", reason=reason,
                exit_code=exit_code, terminated_reason=terminated, disrupted=disrupted,
                planned_end=job.planned_end,
            )
        )  # fmt: skip
    return pods


# --- serving and MIG pods -----------------------------------------------------------------------


def _server_pod(rng: Random, endpoint: Endpoint, node: str, start: int, end: int | None) -> Pod:
    owner = f"{endpoint.name}-{rng.getrandbits(32):08x}"[: len(endpoint.name) + 11]
    return Pod(
        namespace=NAMESPACES[endpoint.team], name=f"{owner}-{_suffix(rng)}", uid=_uid(rng),
        labels={
            "team": endpoint.team, "finops.io/endpoint": endpoint.name,
            "app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": endpoint.name,
        },
        node=node, resources={endpoint.resource: endpoint.count}, start=start, end=end,
        phase="Running" if end is None else "Failed", owner_kind="ReplicaSet", owner_name=owner,
        image="vllm/vllm-openai:v0.6.3", exit_code=0 if end is None else 143,
        terminated_reason="" if end is None else "Error", disrupted=end is not None,
    )  # fmt: skip


def _llama_pods(rng: Random, nodes: list[Node], month: Month) -> list[Pod]:
    """A replica per serving node and billed interval: the node's maintenance ends one pod (the
    node shuts down, the pod is disrupted) and a new one starts when the node is back."""
    endpoint = ENDPOINT_BY_NAME["llama-70b-chat"]
    pods = []
    for node in nodes:
        for start, end in node.up:
            ready = start + rng.randint(300, 900)  # image pull and model load
            stop = None if end >= month.seconds else end - rng.randint(30, 120)
            pods.append(_server_pod(rng, endpoint, node.hostname, ready, stop))
    return pods


def _mig_slots(node: Node) -> list[str]:
    return [profile for gpu in _MIG_LAYOUT for profile in gpu]


_MIG_BATCH = (
    # (team, run prefix, profile, hours)
    ("", "notebook", MIG_1G, (0.5, 5.0)),
    ("", "notebook", MIG_3G, (0.5, 5.0)),
    ("speech", "asr-eval-mig", MIG_3G, (0.3, 2.0)),
    ("platform", "gpu-healthcheck-mig", MIG_1G, (0.1, 0.3)),
    ("language", "mistral-eval-mig", MIG_3G, (0.5, 3.0)),
)


def _mig_pods(rng: Random, node: Node, month: Month) -> list[Pod]:
    slots = _mig_slots(node)
    pods: list[Pod] = []
    serving: list[tuple[Endpoint, int]] = []
    taken: set[int] = set()
    for endpoint in ENDPOINTS:
        for _ in range(endpoint.replicas):
            slot = next(i for i, p in enumerate(slots) if p == endpoint.resource and i not in taken)
            taken.add(slot)
            serving.append((endpoint, slot))
    restarted = False
    for endpoint, _ in serving:
        pod = _server_pod(rng, endpoint, node.hostname, rng.randint(300, 900), None)
        if endpoint.name == "mistral-7b-chat" and not restarted:
            # The container is OOM-killed once and restarted in place: the counters reset.
            pod.restart_at = month.seconds // 2 + rng.randint(0, DAY)
            restarted = True
        pods.append(pod)
    runs: dict[str, int] = {}
    for slot, profile in enumerate(slots):
        if slot in taken:
            continue
        kinds = [k for k in _MIG_BATCH if k[2] == profile]
        t = rng.randint(0, 4 * HOUR)
        while True:
            team, prefix, _, (lo, hi) = rng.choice(kinds)
            duration = int(rng.uniform(lo, hi) * HOUR)
            if t + duration >= month.seconds:
                break
            runs[prefix] = runs.get(prefix, 0) + 1
            failed = rng.random() < 0.05
            owner = f"{prefix}-{runs[prefix]}"
            labels = {"finops.io/run": owner}
            if team not in _UNLABELLED_TEAMS:
                labels["team"] = team
            pods.append(
                Pod(
                    namespace=NAMESPACES[team], name=f"{owner}-{_suffix(rng)}", uid=_uid(rng),
                    labels=labels, node=node.hostname, resources={profile: 1}, start=t,
                    end=t + duration, phase="Failed" if failed else "Succeeded",
                    owner_kind="Job", owner_name=owner,
                    image="nvcr.io/nvidia/pytorch:24.09-py3", exit_code=1 if failed else 0,
                    terminated_reason="Error" if failed else "Completed",
                )
            )  # fmt: skip
            t += duration + int(rng.expovariate(1 / (3 * HOUR))) + 60
    return pods


def cluster_pods(
    *, rng: Random, month: Month, jobs: list[Job], serving: list[Node], mig: Node | None
) -> list[Pod]:
    pods = [pod for job in jobs for pod in _job_pods(rng, job)]
    pods += _llama_pods(rng, serving, month)
    if mig is not None:
        pods += _mig_pods(rng, mig, month)
    pods.sort(key=lambda p: (p.namespace, p.name))
    return pods


# --- kubectl get pods -A -o json ----------------------------------------------------------------


def _time(month: Month, seconds: int) -> str:
    return (month.start + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container_status(pod: Pod, month: Month) -> dict[str, object]:
    status: dict[str, object] = {
        "name": "main", "image": pod.image, "ready": pod.phase == "Running",
        "restartCount": 0, "started": pod.phase == "Running",
    }  # fmt: skip
    assert pod.start is not None
    if pod.restart_at is not None:
        status["restartCount"] = 1
        status["lastState"] = {
            "terminated": {
                "exitCode": 137, "reason": "OOMKilled", "startedAt": _time(month, pod.start),
                "finishedAt": _time(month, pod.restart_at),
            }
        }  # fmt: skip
    if pod.phase == "Running":
        started = pod.restart_at + 20 if pod.restart_at is not None else pod.start
        status["state"] = {"running": {"startedAt": _time(month, started)}}
    else:
        assert pod.end is not None
        status["state"] = {
            "terminated": {
                "exitCode": pod.exit_code, "reason": pod.terminated_reason,
                "startedAt": _time(month, pod.start), "finishedAt": _time(month, pod.end),
            }
        }  # fmt: skip
    return status


def _pod_json(pod: Pod, month: Month) -> dict[str, object]:
    created = (pod.start or month.seconds - HOUR) - 5
    metadata = {
        "name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
        "creationTimestamp": _time(month, max(0, created)), "labels": pod.labels,
        "ownerReferences": [
            {
                "apiVersion": "batch/v1" if pod.owner_kind == "Job" else (
                    "kubeflow.org/v1" if pod.owner_kind == "PyTorchJob" else "apps/v1"
                ),
                "kind": pod.owner_kind, "name": pod.owner_name, "controller": True,
                "blockOwnerDeletion": True, "uid": str(uuid.uuid5(uuid.NAMESPACE_URL,
                                                                  pod.owner_name)),
            }
        ],
    }  # fmt: skip
    limits = {"cpu": "12", "memory": "200Gi", **{k: str(v) for k, v in pod.resources.items()}}
    spec: dict[str, object] = {
        "containers": [
            {
                "name": "main", "image": pod.image,
                "resources": {"limits": limits, "requests": dict(limits)},
            }
        ],
        "restartPolicy": "Always" if pod.owner_kind == "ReplicaSet" else "Never",
        "schedulerName": "default-scheduler",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }  # fmt: skip
    status: dict[str, object] = {"phase": pod.phase, "qosClass": "Guaranteed"}
    if pod.node is None or pod.start is None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/12 nodes are available: insufficient nvidia.com/gpu."}
        ]  # fmt: skip
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
                "status": status}  # fmt: skip
    spec["nodeName"] = pod.node
    status["startTime"] = _time(month, pod.start)
    status["hostIP"] = f"10.224.0.{sum(map(ord, pod.node)) % 250 + 4}"
    if pod.reason:
        status["reason"] = pod.reason
    if pod.disrupted:
        assert pod.end is not None
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
             "message": "Pod was terminated in response to imminent node shutdown.",
             "lastTransitionTime": _time(month, pod.end)}
        ]  # fmt: skip
    status["containerStatuses"] = [_container_status(pod, month)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": status}  # fmt: skip


def pod_list_bytes(pods: list[Pod], month: Month) -> bytes:
    document = {
        "apiVersion": "v1",
        "items": [_pod_json(pod, month) for pod in pods],
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }
    return (json.dumps(document, indent=1) + "\n").encode("utf-8")


# --- vLLM counters ------------------------------------------------------------------------------


def _diurnal(seconds: int) -> float:
    """Traffic through the (US) day: low at night, peak mid-afternoon UTC, lighter weekends."""
    hour = (seconds // HOUR) % 24
    day = seconds // DAY
    shape = 0.25 + 0.75 * max(0.0, 1 - abs(hour - 18) / 9)
    return shape * (0.6 if day % 7 in (3, 4) else 1.0)


def pod_series(*, rng: Random, pods: list[Pod], month: Month) -> list[Series]:
    """Counters of every serving pod, sampled every STEP seconds while it runs."""
    result = []
    for pod in pods:
        if not pod.endpoint or pod.start is None:
            continue
        endpoint = ENDPOINT_BY_NAME[pod.endpoint]
        series = Series(pod, endpoint)
        first = -(-pod.start // STEP) * STEP
        last = month.seconds if pod.end is None else pod.end
        counts = [0, 0, 0, 0]  # stop, length, prompt, generation
        for t in range(first, last + 1, STEP):
            if series.times:
                if pod.restart_at is not None and series.times[-1] < pod.restart_at <= t:
                    counts = [0, 0, 0, 0]
                    new = [0, 0, 0, 0]
                else:
                    rate = endpoint.requests_per_hour * _diurnal(t) * STEP / HOUR
                    requests = max(0, int(rng.gauss(rate, rate * 0.1)))
                    length = 0
                    if endpoint.generation_tokens != (0, 0):  # embeddings never hit max_tokens
                        length = requests * rng.randint(5, 20) // 100
                    prompt = requests * rng.randint(*endpoint.prompt_tokens)
                    generation = requests * rng.randint(*endpoint.generation_tokens)
                    new = [requests - length, length, prompt, generation]
                    counts = [a + b for a, b in zip(counts, new, strict=True)]
                # What the parser will count: the increase closes the hour (t - 1) // HOUR.
                hour = series.hourly.setdefault((t - 1) // HOUR, [0, 0, 0])
                hour[0] += new[0] + new[1]
                hour[1] += new[2]
                hour[2] += new[3]
            series.times.append(t)
            series.requests_stop.append(counts[0])
            series.requests_length.append(counts[1])
            series.prompt.append(counts[2])
            series.generation.append(counts[3])
        if series.times:
            result.append(series)
    return result


def _matrix(
    series: Series, name: str, values: list[int], extra: dict[str, str], start: int
) -> dict:
    pod = series.pod
    metric = {
        "__name__": name, "model_name": series.endpoint.model,
        "finops_io_endpoint": series.endpoint.name, "finops_io_team": series.endpoint.team,
        "namespace": pod.namespace, "pod": pod.name, "job": "vllm",
        "instance": f"{pod.name}:8000", **extra,
    }  # fmt: skip
    return {
        "metric": metric,
        "values": [[start + t, str(v)] for t, v in zip(series.times, values, strict=True)],
    }


def query_range_bytes(series: list[Series], month: Month) -> bytes:
    """One `query_range` response (matrix) holding every counter of the given series."""
    start = int(month.start.timestamp())
    result = []
    for s in series:
        if s.endpoint.generation_tokens != (0, 0):
            result.append(
                _matrix(s, "vllm:request_success_total", s.requests_length,
                        {"finished_reason": "length"}, start)
            )  # fmt: skip
        result.append(
            _matrix(s, "vllm:request_success_total", s.requests_stop,
                    {"finished_reason": "stop"}, start)
        )  # fmt: skip
        result.append(_matrix(s, "vllm:prompt_tokens_total", s.prompt, {}, start))
        result.append(_matrix(s, "vllm:generation_tokens_total", s.generation, {}, start))
    document = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return (json.dumps(document, separators=(",", ":")) + "\n").encode("utf-8")
