"""fetch_kubernetes_pods: the real `kubernetes` client, configured from a kubeconfig file, against
a local HTTP server on 127.0.0.1 that answers `GET /api/v1/pods` with recorded PodList pages
(limit + continue) and Status errors in the Kubernetes API's own shapes. The snapshot is written as
`kubectl get pods -A -o json` and imported through the jobs path; a later snapshot closes a
running pod; 401/403 fail at once, 5xx and unreachable APIs are retried."""

from __future__ import annotations

import copy
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pytest_django import Settings

from billing_ingest.models import Cluster, ImportBatch, JobRecord, KubernetesSource
from billing_ingest.services.kubernetes import kubernetes_source_configure
from billing_ingest.sources.kubernetes_api import KubernetesAccessError, KubernetesTransientError
from billing_ingest.tasks.kubernetes import (
    MAX_RETRIES,
    fetch_kubernetes_pods_all,
    fetch_kubernetes_pods_task,
)
from finops.celery import app as celery_app

pytest.importorskip("kubernetes")

pytestmark = pytest.mark.django_db

CLUSTER = "gpu-prod"
TOKEN = "recorded-test-token"
PAGE_SIZE = 2

# ------------------------------------------------------------------ recorded API shapes


def container_status(
    name: str, *, running_since: str | None = None, terminated: dict[str, Any] | None = None
) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if running_since is not None:
        state["running"] = {"startedAt": running_since}
    if terminated is not None:
        state["terminated"] = {
            "containerID": f"containerd://{name}0123456789abcdef",
            **terminated,
        }
    return {
        "name": name,
        "state": state,
        "lastState": {},
        "ready": running_since is not None,
        "restartCount": 0,
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "imageID": "nvcr.io/nvidia/pytorch@sha256:" + "a" * 64,
        "containerID": f"containerd://{name}0123456789abcdef",
        "started": running_since is not None,
    }


def pod(
    *,
    namespace: str,
    name: str,
    limits: dict[str, str],
    phase: str,
    node: str | None,
    start: str | None,
    labels: dict[str, str] | None = None,
    statuses: list[dict] | None = None,
    resource_version: str = "1001",
) -> dict:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                "resources": {"limits": dict(limits), "requests": dict(limits)},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
    }
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if start:
        status["startTime"] = start
        status["hostIP"] = "10.0.4.17"
        status["podIP"] = "10.244.3.9"
    if statuses is not None:
        status["containerStatuses"] = statuses
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"5f1c6a0e-{abs(hash(name)) % 10**4:04d}-4c1d-9a8e-1b2c3d4e5f60",
            "resourceVersion": resource_version,
            "creationTimestamp": "2024-09-03T09:59:50Z",
            "labels": labels or {},
        },
        "spec": spec,
        "status": status,
    }


def training_pod(*, finished: bool) -> dict:
    labels = {"finops.io/run": "llama-7b-sft", "finops.io/team": "nlp"}
    if not finished:
        statuses = [container_status("main", running_since="2024-09-03T10:00:05Z")]
        return pod(
            namespace="train",
            name="llama-7b-sft-0",
            limits={"nvidia.com/gpu": "8", "cpu": "96"},
            phase="Running",
            node="gpu-node-01",
            start="2024-09-03T10:00:00Z",
            labels=labels,
            statuses=statuses,
        )
    terminated = {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": "2024-09-03T10:00:05Z",
        "finishedAt": "2024-09-03T14:30:00Z",
    }
    return pod(
        namespace="train",
        name="llama-7b-sft-0",
        limits={"nvidia.com/gpu": "8", "cpu": "96"},
        phase="Succeeded",
        node="gpu-node-01",
        start="2024-09-03T10:00:00Z",
        labels=labels,
        statuses=[container_status("main", terminated=terminated)],
        resource_version="1450",
    )


def mig_pod() -> dict:
    return pod(
        namespace="infer",
        name="vllm-chat-7d9f8-x2x4k",
        limits={"nvidia.com/mig-3g.40gb": "1"},
        phase="Running",
        node="gpu-node-02",
        start="2024-09-03T08:00:00Z",
        labels={"finops.io/endpoint": "chat", "team": "assist"},
        statuses=[container_status("main", running_since="2024-09-03T08:00:10Z")],
    )


def oom_pod() -> dict:
    terminated = {
        "exitCode": 137,
        "reason": "OOMKilled",
        "startedAt": "2024-09-03T09:00:03Z",
        "finishedAt": "2024-09-03T09:47:12Z",
    }
    return pod(
        namespace="research",
        name="eval-sweep-17",
        limits={"nvidia.com/mig-1g.10gb": "2"},
        phase="Failed",
        node="gpu-node-02",
        start="2024-09-03T09:00:00Z",
        labels={"job-name": "eval-sweep"},
        statuses=[container_status("main", terminated=terminated)],
    )


def pending_pod() -> dict:
    # Not scheduled yet: no node, no start time, nothing held.
    return pod(
        namespace="train",
        name="queued-0",
        limits={"nvidia.com/gpu": "8"},
        phase="Pending",
        node=None,
        start=None,
    )


def status_error(code: int, reason: str, message: str) -> dict:
    """The Status object the API server sends with an error response."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"kind": "pods"},
        "code": code,
    }


FORBIDDEN_MESSAGE = (
    'pods is forbidden: User "system:serviceaccount:finops:collector" cannot list resource '
    '"pods" in API group "" at the cluster scope'
)

# ------------------------------------------------------------------ the recorded API server


@dataclass
class RecordedApi:
    """Serves the pods as an API server would: pages of `limit` pods with a continue token.
    `failures` are answered first, one per request: (status, Status body)."""

    pods: list[dict] = field(default_factory=list)
    failures: list[tuple[int, dict]] = field(default_factory=list)
    # Continue tokens the server answers 410 Gone to once (an expired list snapshot).
    expire_tokens: set[str] = field(default_factory=set)
    requests: list[dict[str, Any]] = field(default_factory=list)
    list_version: int = 5000

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, dict]:
        if path != "/api/v1/pods":
            return 404, status_error(404, "NotFound", f"the server could not find {path}")
        if self.failures:
            return self.failures.pop(0)
        limit = int(query.get("limit", ["500"])[0])
        token = query.get("continue", [""])[0]
        if token in self.expire_tokens:
            self.expire_tokens.discard(token)
            return 410, status_error(
                410,
                "Expired",
                "The provided continue parameter is too old to display a "
                "consistent list result. You can start a new list without the continue parameter.",
            )
        offset = int(token.split("-")[1]) if token else 0
        items = self.pods[offset : offset + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(self.list_version)}
        if offset + limit < len(self.pods):
            metadata["continue"] = f"{self.list_version}-{offset + limit}"
            metadata["remainingItemCount"] = len(self.pods) - offset - limit
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}


@pytest.fixture
def api() -> Iterator[tuple[RecordedApi, str]]:
    recorded = RecordedApi()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            recorded.requests.append(
                {
                    "path": url.path,
                    "query": query,
                    "authorization": self.headers.get("Authorization"),
                }
            )
            status, body = recorded.answer(url.path, query)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recorded, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def write_kubeconfig(path: Path, server: str) -> Path:
    # JSON is YAML: the client's kubeconfig loader reads it as a kubeconfig file.
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": CLUSTER, "cluster": {"server": server}}],
                "users": [{"name": "collector", "user": {"token": TOKEN}}],
                "contexts": [
                    {"name": "finops", "context": {"cluster": CLUSTER, "user": "collector"}}
                ],
                "current-context": "finops",
            }
        )
    )
    return path


@pytest.fixture
def retrying() -> Iterator[None]:
    """Eager tasks re-run a retry at once (countdown ignored) only when failures are not
    propagated straight out of the first attempt; a worker retries after the backoff."""
    previous = celery_app.conf.task_eager_propagates
    celery_app.conf.task_eager_propagates = False
    yield
    celery_app.conf.task_eager_propagates = previous


@pytest.fixture
def data_dir(settings: Settings, tmp_path: Path) -> Path:
    settings.FINOPS_DATA_DIR = tmp_path / "data"
    return settings.FINOPS_DATA_DIR


@pytest.fixture
def cluster(api: tuple[RecordedApi, str], tmp_path: Path, data_dir: Path) -> Cluster:
    _, server = api
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    cluster = Cluster.objects.create(name=CLUSTER)
    kubernetes_source_configure(
        cluster=cluster, kubeconfig_path=str(kubeconfig), page_size=PAGE_SIZE
    )
    return cluster


def snapshot_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "kubernetes" / CLUSTER).glob("*.json"))


def job(job_id: str) -> JobRecord:
    return JobRecord.objects.get(cluster=CLUSTER, job_id=job_id)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


# ------------------------------------------------------------------ tests


def test_command_pages_through_all_pods_and_imports_the_snapshot(
    api: tuple[RecordedApi, str], tmp_path: Path, data_dir: Path
) -> None:
    recorded, server = api
    recorded.pods = [training_pod(finished=False), mig_pod(), oom_pod(), pending_pod()]
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)

    call_command(
        "fetch_kubernetes_pods",
        "--cluster",
        CLUSTER,
        "--kubeconfig",
        str(kubeconfig),
        "--page-size",
        str(PAGE_SIZE),
        "--no-attribute",
    )

    # Two pages of two: the second asks for the first page's continue token with the same limit.
    assert [r["path"] for r in recorded.requests] == ["/api/v1/pods", "/api/v1/pods"]
    assert [r["query"]["limit"] for r in recorded.requests] == [[str(PAGE_SIZE)]] * 2
    assert "continue" not in recorded.requests[0]["query"]
    assert recorded.requests[1]["query"]["continue"] == [f"{recorded.list_version}-{PAGE_SIZE}"]
    assert {r["authorization"] for r in recorded.requests} == {f"Bearer {TOKEN}"}

    source = KubernetesSource.objects.get(cluster__name=CLUSTER)
    assert (source.kubeconfig_path, source.page_size) == (str(kubeconfig), PAGE_SIZE)

    # The file is the List kubectl prints, holding every pod of every page.
    [snapshot] = snapshot_files(data_dir)
    document = json.loads(snapshot.read_text())
    assert (document["apiVersion"], document["kind"]) == ("v1", "List")
    names = [p["metadata"]["name"] for p in document["items"]]
    assert names == [p["metadata"]["name"] for p in recorded.pods]

    batch = ImportBatch.objects.get(kind=ImportBatch.Kind.JOBS, source=CLUSTER)
    assert (batch.status, batch.format, batch.file_name) == (
        "succeeded",
        "kubernetes",
        str(snapshot),
    )
    # The pending pod never ran: three records.
    assert batch.row_count == 3
    assert JobRecord.objects.filter(cluster=CLUSTER).count() == 3

    training = job("train/llama-7b-sft-0")
    assert (training.state, training.end) == ("RUNNING", None)
    assert training.start == at("2024-09-03T10:00:00Z")
    assert training.exact_gpus() == 8
    assert (training.run_id, training.account, training.nodes) == (
        "llama-7b-sft",
        "nlp",
        ["gpu-node-01"],
    )

    mig = job("infer/vllm-chat-7d9f8-x2x4k")
    assert mig.exact_gpus() == Fraction(3, 7)
    assert mig.gpus == Decimal(3 / 7).quantize(Decimal("0.000001"))
    assert mig.endpoint == "chat"

    oom = job("research/eval-sweep-17")
    assert oom.state == "OUT_OF_MEMORY"
    assert oom.end == at("2024-09-03T09:47:12Z")
    assert oom.exact_gpus() == 2 * Fraction(1, 7)
    assert oom.run_id == "eval-sweep"


def test_a_later_snapshot_finishes_the_running_pod_and_keeps_vanished_ones(
    api: tuple[RecordedApi, str], cluster: Cluster, data_dir: Path
) -> None:
    recorded, _ = api
    recorded.pods = [training_pod(finished=False), mig_pod(), oom_pod()]
    first = fetch_kubernetes_pods_task.delay(cluster.pk).get()
    assert first["status"] == "succeeded"
    running = job("train/llama-7b-sft-0")
    assert running.end is None

    # 15 minutes later the training pod has finished; the inference pod was deleted meanwhile.
    recorded.pods = [training_pod(finished=True), oom_pod()]
    recorded.list_version += 1
    second = fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert second["status"] == "succeeded"
    assert second["batch_id"] != first["batch_id"]
    finished = job("train/llama-7b-sft-0")
    assert finished.pk == running.pk  # upserted, not duplicated
    assert (finished.state, finished.end) == ("COMPLETED", at("2024-09-03T14:30:00Z"))
    assert finished.batch_id == second["batch_id"]
    # Gone from the API, kept from the earlier snapshot.
    assert job("infer/vllm-chat-7d9f8-x2x4k").batch_id == first["batch_id"]
    assert JobRecord.objects.filter(cluster=CLUSTER).count() == 3
    assert len(snapshot_files(data_dir)) == 2


def test_an_unchanged_cluster_is_a_duplicate_and_leaves_no_second_file(
    api: tuple[RecordedApi, str], cluster: Cluster, data_dir: Path
) -> None:
    recorded, _ = api
    recorded.pods = [training_pod(finished=False), oom_pod()]
    fetch_kubernetes_pods_task.delay(cluster.pk).get()
    recorded.list_version += 7  # the list's resourceVersion moves even when the pods do not

    again = fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert again["status"] == "duplicate"
    assert len(snapshot_files(data_dir)) == 1


def test_forbidden_fails_at_once_with_the_reason_and_keeps_earlier_data(
    api: tuple[RecordedApi, str], cluster: Cluster, data_dir: Path, retrying: None
) -> None:
    recorded, _ = api
    recorded.pods = [training_pod(finished=False), mig_pod(), oom_pod()]
    fetch_kubernetes_pods_task.delay(cluster.pk).get()
    before = list(JobRecord.objects.filter(cluster=CLUSTER).order_by("job_id").values())
    requests_before = len(recorded.requests)

    recorded.pods = [training_pod(finished=True)]
    recorded.failures = [(403, status_error(403, "Forbidden", FORBIDDEN_MESSAGE))] * 5
    with pytest.raises(KubernetesAccessError) as raised:
        fetch_kubernetes_pods_task.delay(cluster.pk).get()

    message = str(raised.value)
    assert "403 Forbidden" in message
    assert FORBIDDEN_MESSAGE in message
    assert "`list` on `pods`" in message
    assert len(recorded.requests) == requests_before + 1  # no retry
    assert list(JobRecord.objects.filter(cluster=CLUSTER).order_by("job_id").values()) == before
    failed = ImportBatch.objects.get(source=CLUSTER, status=ImportBatch.Status.FAILED)
    assert failed.error == message
    assert len(snapshot_files(data_dir)) == 1
    assert not list((data_dir / "kubernetes" / CLUSTER).glob("*.part"))


def test_command_reports_unauthorized_without_retrying(
    api: tuple[RecordedApi, str], cluster: Cluster, retrying: None
) -> None:
    recorded, _ = api
    recorded.failures = [(401, status_error(401, "Unauthorized", "Unauthorized"))] * 5

    with pytest.raises(CommandError, match="401 Unauthorized"):
        call_command("fetch_kubernetes_pods", "--cluster", CLUSTER, "--no-attribute")

    assert len(recorded.requests) == 1
    assert not JobRecord.objects.exists()


def test_command_without_a_worker_reports_a_transient_error(
    api: tuple[RecordedApi, str], cluster: Cluster
) -> None:
    # The embedded default runs tasks eagerly and propagates: one attempt, a clear message.
    recorded, _ = api
    unavailable = status_error(503, "ServiceUnavailable", "the server is currently unable")
    recorded.failures = [(503, unavailable)] * 5

    with pytest.raises(CommandError, match=r"503 .*transient error, try again later"):
        call_command("fetch_kubernetes_pods", "--cluster", CLUSTER, "--no-attribute")

    assert len(recorded.requests) == 1


def test_command_needs_a_stored_or_given_connection(db: None) -> None:
    Cluster.objects.create(name=CLUSTER)
    with pytest.raises(CommandError, match="no Kubernetes API connection"):
        call_command("fetch_kubernetes_pods", "--cluster", CLUSTER)


def test_a_503_is_retried_and_the_retry_imports(
    api: tuple[RecordedApi, str], cluster: Cluster, retrying: None
) -> None:
    recorded, _ = api
    recorded.pods = [training_pod(finished=False), mig_pod(), oom_pod()]
    unavailable = status_error(503, "ServiceUnavailable", "the server is currently unable")
    recorded.failures = [(503, unavailable)]

    summary = fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert summary["status"] == "succeeded"
    assert summary["row_count"] == 3
    # The failed request, then the two pages of the retry.
    assert len(recorded.requests) == 3
    # A failure that was retried past is not an import failure.
    assert not ImportBatch.objects.filter(status=ImportBatch.Status.FAILED).exists()


def test_a_page_failing_mid_list_is_retried_from_the_first_page(
    api: tuple[RecordedApi, str], cluster: Cluster, retrying: None
) -> None:
    recorded, _ = api
    recorded.pods = [training_pod(finished=False), mig_pod(), oom_pod()]
    bad_gateway = status_error(502, "InternalError", "upstream connect error")
    recorded.failures = []
    original = recorded.answer

    def fail_second_request_once(path: str, query: dict) -> tuple[int, dict]:
        if "continue" in query and not getattr(recorded, "_failed", False):
            recorded._failed = True  # type: ignore[attr-defined]
            return 502, bad_gateway
        return original(path, query)

    recorded.answer = fail_second_request_once  # type: ignore[method-assign]
    summary = fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert summary["status"] == "succeeded"
    assert summary["row_count"] == 3
    continued = ["continue" in r["query"] for r in recorded.requests]
    assert continued == [False, True, False, True]


def test_a_persistent_503_gives_up_after_three_retries(
    api: tuple[RecordedApi, str], cluster: Cluster, retrying: None
) -> None:
    recorded, _ = api
    unavailable = status_error(503, "ServiceUnavailable", "etcdserver: leader changed")
    recorded.failures = [(503, unavailable)] * 10

    with pytest.raises(KubernetesTransientError, match="503"):
        fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert len(recorded.requests) == 1 + MAX_RETRIES
    # One outage, one failed batch: only the last attempt records it.
    [failed] = ImportBatch.objects.filter(status=ImportBatch.Status.FAILED)
    assert "etcdserver: leader changed" in failed.error


def test_an_unreachable_api_is_transient(tmp_path: Path, data_dir: Path, retrying: None) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{closed_port}")
    cluster = Cluster.objects.create(name=CLUSTER)
    kubernetes_source_configure(cluster=cluster, kubeconfig_path=str(kubeconfig))

    with pytest.raises(KubernetesTransientError, match="unreachable"):
        fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert ImportBatch.objects.filter(status=ImportBatch.Status.FAILED).count() == 1


def test_an_expired_continue_token_restarts_the_list(
    api: tuple[RecordedApi, str], cluster: Cluster
) -> None:
    recorded, _ = api
    recorded.pods = [training_pod(finished=False), mig_pod(), oom_pod()]
    recorded.expire_tokens = {f"{recorded.list_version}-{PAGE_SIZE}"}

    summary = fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert summary["status"] == "succeeded"
    assert summary["row_count"] == 3
    continued = ["continue" in r["query"] for r in recorded.requests]
    assert continued == [False, True, False, True]


def test_missing_kubeconfig_env_var_is_an_access_error(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, api: tuple[RecordedApi, str]
) -> None:
    recorded, _ = api
    source = KubernetesSource.objects.get(cluster=cluster)
    source.kubeconfig_path, source.kubeconfig_env = "", "FINOPS_TEST_KUBECONFIG_UNSET"
    source.save()
    monkeypatch.delenv("FINOPS_TEST_KUBECONFIG_UNSET", raising=False)

    with pytest.raises(KubernetesAccessError, match="FINOPS_TEST_KUBECONFIG_UNSET is not set"):
        fetch_kubernetes_pods_task.delay(cluster.pk).get()
    assert recorded.requests == []


def test_kubeconfig_env_var_names_the_file(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, api: tuple[RecordedApi, str]
) -> None:
    recorded, _ = api
    recorded.pods = [oom_pod()]
    source = KubernetesSource.objects.get(cluster=cluster)
    monkeypatch.setenv("FINOPS_TEST_KUBECONFIG", source.kubeconfig_path)
    source.kubeconfig_path, source.kubeconfig_env = "", "FINOPS_TEST_KUBECONFIG"
    source.save()

    summary = fetch_kubernetes_pods_task.delay(cluster.pk).get()

    assert summary["row_count"] == 1


def test_dispatcher_fetches_every_enabled_cluster(
    api: tuple[RecordedApi, str], cluster: Cluster, tmp_path: Path
) -> None:
    recorded, server = api
    recorded.pods = [copy.deepcopy(oom_pod())]
    other = Cluster.objects.create(name="gpu-dev")
    kubernetes_source_configure(
        cluster=other, kubeconfig_path=str(write_kubeconfig(tmp_path / "dev", server))
    )
    paused = Cluster.objects.create(name="gpu-paused")
    kubernetes_source_configure(
        cluster=paused, kubeconfig_path=str(write_kubeconfig(tmp_path / "paused", server))
    )
    KubernetesSource.objects.filter(cluster=paused).update(enabled=False)
    Cluster.objects.create(name="slurm-only")  # no API connection

    assert fetch_kubernetes_pods_all.delay().get() == sorted([cluster.pk, other.pk])

    stored = set(JobRecord.objects.values_list("cluster", flat=True))
    assert stored == {CLUSTER, "gpu-dev"}


def test_beat_runs_the_dispatcher_every_15_minutes_and_expires_before_the_next(
    settings: Settings,
) -> None:
    from finops.celery import app

    [entry] = [
        e for e in app.conf.beat_schedule.values() if e["task"] == fetch_kubernetes_pods_all.name
    ]
    schedule = entry["schedule"]
    assert schedule.minute == {0, 15, 30, 45}
    assert len(schedule.hour) == 24
    assert 0 < entry["options"]["expires"] < 15 * 60
    assert fetch_kubernetes_pods_all.name in app.tasks


def test_a_source_needs_exactly_one_way_to_connect(db: None) -> None:
    cluster = Cluster.objects.create(name=CLUSTER)
    with pytest.raises(ValueError, match="exactly one"):
        kubernetes_source_configure(cluster=cluster, in_cluster=True, kubeconfig_path="/x")
    with pytest.raises(ValueError, match="exactly one"):
        kubernetes_source_configure(cluster=cluster)


# ------------------------------------------------------------------ snapshot time (issue 24 #8, #9)


def lost_pod(*, phase: str = "Unknown") -> dict:
    """A training pod whose node stopped reporting: phase Unknown, reason NodeLost."""
    found = training_pod(finished=False)
    found["metadata"]["name"] = "llama-7b-sft-1"
    found["spec"]["nodeName"] = "gpu-node-03"
    found["status"]["phase"] = phase
    if phase == "Unknown":
        found["status"]["reason"] = "NodeLost"
        found["status"]["message"] = (
            "Node gpu-node-03 which was running pod llama-7b-sft-1 is unresponsive"
        )
    return found


def evicted_pod() -> dict:
    """Evicted by an older kubelet: no container or condition times."""
    found = pod(
        namespace="infer", name="vllm-chat-7d9f8-k8s2p", limits={"nvidia.com/gpu": "1"},
        phase="Failed", node="gpu-node-02", start="2024-09-03T08:00:00Z",
    )  # fmt: skip
    found["status"]["reason"] = "Evicted"
    found["status"]["message"] = "The node was low on resource: memory. "
    return found


def taken_at(batch_id: int) -> datetime:
    """The snapshot's time, as its file name records it."""
    name = Path(ImportBatch.objects.get(pk=batch_id).file_name).stem
    return datetime.strptime(name, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)


def test_pods_seen_unknown_or_evicted_end_at_the_time_the_api_was_read(
    api: tuple[RecordedApi, str], cluster: Cluster, data_dir: Path
) -> None:
    recorded, _ = api
    recorded.pods = [lost_pod(), evicted_pod()]
    first = fetch_kubernetes_pods_task.delay(cluster.pk).get()
    first_time = taken_at(first["batch_id"])
    lost = job("train/llama-7b-sft-1")
    assert (lost.state, lost.end) == ("UNKNOWN", first_time)
    evicted = job("infer/vllm-chat-7d9f8-k8s2p")
    assert (evicted.state, evicted.end) == ("PREEMPTED", first_time)
    assert first["notes"] == {
        "evicted pods without container or condition times ended at the snapshot time "
        f"{first_time:%Y-%m-%dT%H:%M:%SZ} (when the API was read)": 1,
        "pods in phase Unknown (node lost) ended at the snapshot time "
        f"{first_time:%Y-%m-%dT%H:%M:%SZ} (when the API was read)": 1,
    }

    # The next snapshot still sees both: the lost pod was last seen then; the evicted pod ended
    # before the first snapshot saw it, and keeps that end.
    recorded.pods.append(oom_pod())
    second = fetch_kubernetes_pods_task.delay(cluster.pk).get()
    second_time = taken_at(second["batch_id"])
    assert second_time > first_time
    assert job("train/llama-7b-sft-1").end == second_time
    assert job("infer/vllm-chat-7d9f8-k8s2p").end == first_time

    # Its node back, the same pod runs on: running again, charged to date.
    recorded.pods = [lost_pod(phase="Running"), evicted_pod(), oom_pod()]
    fetch_kubernetes_pods_task.delay(cluster.pk).get()
    back = job("train/llama-7b-sft-1")
    assert (back.pk, back.state, back.end) == (lost.pk, "RUNNING", None)


def test_the_command_prints_the_snapshot_notes(
    api: tuple[RecordedApi, str], cluster: Cluster, data_dir: Path
) -> None:
    recorded, _ = api
    recorded.pods = [lost_pod()]
    out = StringIO()
    call_command("fetch_kubernetes_pods", "--cluster", CLUSTER, "--no-attribute", stdout=out)
    assert (
        f"cluster {CLUSTER}: note: 1 pod: pods in phase Unknown (node lost) ended at the "
        "snapshot time "
    ) in out.getvalue()
