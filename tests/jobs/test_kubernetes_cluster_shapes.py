"""Kubernetes pods as clusters produce them (issue 24, items 7-11), read from the hand-made files
in fixtures/kubernetes/ and fixtures/scenarios/gke-shared-pods/ (kubectl's own JSON and YAML):
time-sliced GPUs under the device plugin's default name, pods in phase Unknown, evicted pods
without times, Deployment run ids across rollouts (and OpenCost's names for them), and YAML.
The scenario runs the same pods through a bill (tests/attribution/test_fixture_scenarios.py:
conservation and the hand-worked money)."""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
from fractions import Fraction
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import Cluster, ImportBatch, JobRecord
from billing_ingest.parsers import kubernetes_files
from billing_ingest.parsers.kubernetes import parse_pods
from billing_ingest.parsers.opencost import parse_allocations
from billing_ingest.parsers.rows import JobRow
from billing_ingest.parsers.slurm import SacctStats
from finops.core.errors import ImportFormatError
from tests.builders import container, pod, pod_list

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SHAPES = FIXTURES / "kubernetes"
SCENARIO_PODS = FIXTURES / "scenarios" / "gke-shared-pods" / "pods-gke.json"
SHARED_POOL = "gke-ml-shared-a100-"
NOTEBOOKS = ["jupyter-alice", "jupyter-bob", "jupyter-chen", "jupyter-dana"]
RUN, HASH, ROLLOUT_HASH = "finops.io/run", "pod-template-hash", "rollouts-pod-template-hash"


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def parse(path: Path, stats: SacctStats | None = None, **kwargs: Any) -> dict[str, JobRow]:
    chunks = parse_pods(path, file_label=path.name, stats=stats, **kwargs)
    return {row["name"]: row for chunk in chunks for row in chunk}


def exact(row: JobRow) -> Fraction:
    numerator, denominator = row["gpu_numerator"], row["gpu_denominator"]
    assert numerator is not None
    assert denominator is not None
    return Fraction(numerator, denominator)


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document, indent=4))
    return path


def ingest(path: Path, *args: str, cluster: str = "gke-ml") -> str:
    out = StringIO()
    call_command(
        "ingest_jobs", "--format", "kubernetes", str(path), "--cluster", cluster, *args,
        "--no-attribute", stdout=out, stderr=out,
    )  # fmt: skip
    return out.getvalue()


# --- 7. time-sliced GPUs under the device plugin's default name ---------------------------------


def test_default_name_gpus_on_a_time_sliced_node_pool_are_a_replica_each() -> None:
    stats = SacctStats()
    rows = parse(SCENARIO_PODS, stats, gpu_sharing_pools={SHARED_POOL: 4})
    # Four notebooks, each `nvidia.com/gpu: "1"` on the pool time-sliced 4 ways: one GPU in all,
    # not four.
    assert {name: exact(rows[name]) for name in NOTEBOOKS} == dict.fromkeys(
        NOTEBOOKS, Fraction(1, 4)
    )
    assert str(rows["jupyter-alice"]["gpus"]) == "0.250000"
    # Nodes outside the pool keep whole GPUs (the cluster's replicas are 1).
    assert exact(rows["bert-pretrain-master-0"]) == 4
    assert exact(rows["llm-serve-5c8d9f6b7a-h7k4p"]) == 2
    note = (
        "pods holding nvidia.com/gpu on GPUs time-sliced 4 ways (node pool "
        f"{SHARED_POOL}*): 1/4 of a GPU each"
    )
    assert stats.notes[note] == 4


def test_the_clusters_replicas_divide_nvidia_gpu_on_every_node_without_a_pool() -> None:
    # `--gpu-sharing-replicas 4` alone: every node of the cluster is time-sliced 4 ways.
    rows = parse(SCENARIO_PODS, gpu_sharing_replicas=4)
    assert {name: exact(rows[name]) for name in NOTEBOOKS} == dict.fromkeys(
        NOTEBOOKS, Fraction(1, 4)
    )
    assert exact(rows["llm-serve-5c8d9f6b7a-h7k4p"]) == Fraction(2, 4)
    # A pool of whole GPUs: the longest matching prefix wins over the cluster's replicas.
    rows = parse(SCENARIO_PODS, gpu_sharing_replicas=4, gpu_sharing_pools={"gke-ml-bert-": 1})
    assert exact(rows["bert-pretrain-master-0"]) == 4
    assert exact(rows["jupyter-alice"]) == Fraction(1, 4)


def test_a_node_label_the_pod_selects_gives_its_replicas() -> None:
    stats = SacctStats()
    rows = parse(SHAPES / "time-sharing-selectors.json", stats)  # no cluster setting at all
    # GKE's time-sharing node selector: 4 clients per GPU.
    assert exact(rows["triton-small-6d4cf56b8d-7hq2x"]) == Fraction(1, 4)
    assert exact(rows["triton-small-6d4cf56b8d-mx8wz"]) == Fraction(1, 4)
    # GPU Feature Discovery's replicas label, required through node affinity: 2.
    assert exact(rows["whisper-batch-0"]) == Fraction(1, 2)
    assert sorted(stats.notes.values()) == [1, 2]
    # The pod's own selector is the node's truth: it wins over the cluster's setting.
    again = parse(SHAPES / "time-sharing-selectors.json", gpu_sharing_replicas=8)
    assert exact(again["whisper-batch-0"]) == Fraction(1, 2)


def test_replicas_set_but_nothing_divided_is_a_warning(tmp_path: Path) -> None:
    stats = SacctStats()
    rows = parse(SCENARIO_PODS, stats, gpu_sharing_pools={"gke-ml-shared-t4-": 4})
    assert exact(rows["jupyter-alice"]) == 1  # the prefix matches no node
    [warning] = [note for note in stats.notes if note.startswith("warning:")]
    assert "no pod's GPUs were divided" in warning
    assert "node pool gke-ml-shared-t4-*: 4" in warning
    assert stats.notes[warning] == 8  # the pods holding GPUs
    # A file with no GPU pod at all has nothing to divide: no warning.
    quiet = SacctStats()
    cpu_only = pod("web", containers=[container(cpu="2")])
    parse(write(tmp_path / "cpu.json", pod_list(cpu_only)), quiet, gpu_sharing_replicas=4)
    assert quiet.notes == {}


def test_dividing_nvidia_gpu_where_the_file_shows_renamed_shared_gpus_is_a_warning(
    tmp_path: Path,
) -> None:
    # renameByDefault: the time-sliced node advertises `.shared`, so `nvidia.com/gpu` elsewhere
    # is a whole GPU the cluster-wide replicas should not divide.
    shared = pod("notebook", containers=[container(**{"nvidia.com/gpu.shared": "1"})])
    whole = pod("trainer", node="gpu-node-2", containers=[container(**{"nvidia.com/gpu": "8"})])
    stats = SacctStats()
    rows = parse(
        write(tmp_path / "pods.json", pod_list(shared, whole)), stats, gpu_sharing_replicas=4
    )
    assert exact(rows["notebook"]) == Fraction(1, 4)
    [warning] = [note for note in stats.notes if note.startswith("warning:")]
    assert "renameByDefault" in warning
    assert "--gpu-sharing-pool PREFIX=1" in warning
    assert stats.notes[warning] == 1


@pytest.mark.django_db
def test_command_stores_the_pools_and_prints_the_notes(tmp_path: Path) -> None:
    out = ingest(SCENARIO_PODS, "--gpu-sharing-pool", f"{SHARED_POOL}=4")
    cluster = Cluster.objects.get(name="gke-ml")
    assert (cluster.gpu_sharing_replicas, cluster.gpu_sharing_pools) == (1, {SHARED_POOL: 4})
    assert f"GPU sharing replicas 1, node pool {SHARED_POOL}*: 4" in out
    assert (
        "note: 4 pods: pods holding nvidia.com/gpu on GPUs time-sliced 4 ways (node pool "
        f"{SHARED_POOL}*): 1/4 of a GPU each"
    ) in out
    assert JobRecord.objects.get(name="jupyter-bob").exact_gpus() == Fraction(1, 4)
    batch = ImportBatch.objects.get()
    assert sum(batch.notes.values()) == 4 + 1 + 1  # divided; Unknown; evicted
    # A later import without the option keeps the stored pools.
    ingest(write(tmp_path / "later.json", pod_list(pod("p", node=f"{SHARED_POOL}0-x"))))
    assert JobRecord.objects.get(name="p").exact_gpus() == Fraction(1, 4)


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["gke-ml-shared", "=4", "gke-ml-shared=0", "gke-ml-shared=x"])
def test_command_refuses_a_bad_pool(value: str) -> None:
    with pytest.raises(CommandError, match=r"PREFIX=N|at least 1"):
        ingest(SCENARIO_PODS, "--gpu-sharing-pool", value)
    assert not ImportBatch.objects.exists()


# --- 8. pods in phase Unknown -------------------------------------------------------------------


def test_a_pod_in_phase_unknown_ends_at_the_snapshot_time() -> None:
    stats = SacctStats()
    rows = parse(SHAPES / "phase-unknown.json", stats)
    lost = rows["llama-sft-worker-1"]
    # kubectl's file has no snapshot time: the latest time it shows (worker-0 Ready at 09:30).
    assert (lost["state"], lost["end"]) == ("UNKNOWN", at("2025-07-10T09:30:00Z"))
    assert rows["llama-sft-worker-0"]["end"] is None  # still running
    assert stats.notes == {
        "pods in phase Unknown (node lost) ended at the snapshot time 2025-07-10T09:30:00Z "
        "(the latest time the file shows)": 1
    }


def test_a_known_snapshot_time_is_used_as_given() -> None:
    taken = at("2025-07-10T09:45:12Z")
    stats = SacctStats()
    rows = parse(SHAPES / "phase-unknown.json", stats, snapshot_time=taken)
    assert rows["llama-sft-worker-1"]["end"] == taken
    assert "(when the API was read)" in next(iter(stats.notes))


@pytest.mark.django_db
def test_the_command_stores_the_unknown_pod_ended_and_says_so() -> None:
    out = ingest(SHAPES / "phase-unknown.json")
    job = JobRecord.objects.get(name="llama-sft-worker-1")
    assert (job.state, job.end) == ("UNKNOWN", at("2025-07-10T09:30:00Z"))
    assert (
        "note: 1 pod: pods in phase Unknown (node lost) ended at the snapshot time "
        "2025-07-10T09:30:00Z (the latest time the file shows)"
    ) in out


# --- 9. evicted pods without times ----------------------------------------------------------------


def test_evicted_pods_without_times_end_at_their_deletion_or_the_snapshot_time() -> None:
    stats = SacctStats()
    rows = parse(SHAPES / "evicted-without-times.json", stats)
    pressure = rows["llm-serve-5c8d9f6b7a-r9t2w"]
    assert (pressure["state"], pressure["start"], pressure["end"]) == (
        "PREEMPTED", at("2025-07-11T08:00:00Z"), at("2025-07-11T10:00:00Z"),
    )  # fmt: skip
    drained = rows["llm-serve-5c8d9f6b7a-b6k1s"]
    assert (drained["state"], drained["end"]) == ("PREEMPTED", at("2025-07-11T09:15:30Z"))
    # Refused at admission: it never ran, and still holds nothing.
    refused = rows["llm-serve-5c8d9f6b7a-zz4np"]
    assert (refused["state"], refused["end"]) == ("FAILED", refused["start"])
    assert stats.notes == {
        "evicted pods without container or condition times ended at the snapshot time "
        "2025-07-11T10:00:00Z (the latest time the file shows)": 1,
        "evicted pods without container or condition times ended at their deletion time": 1,
    }
    assert (stats.data_rows, stats.jobs) == (4, 4)


@pytest.mark.django_db
def test_a_later_snapshot_of_the_evicted_pod_does_not_move_its_end(tmp_path: Path) -> None:
    out = ingest(SHAPES / "evicted-without-times.json")
    assert "note: 1 pod: evicted pods without container or condition times ended at the " in out
    first = JobRecord.objects.get(name="llm-serve-5c8d9f6b7a-r9t2w")
    assert first.end == at("2025-07-11T10:00:00Z")
    # An hour later the evicted pod is still listed (evicted pods stay until collected): the
    # file's latest time is now 11:00, yet the pod ended before the first snapshot saw it.
    document = json.loads((SHAPES / "evicted-without-times.json").read_text())
    later = pod("late", namespace="speech", start="2025-07-11T11:00:00Z")
    document["items"].append(later)
    ingest(write(tmp_path / "later.json", document))
    again = JobRecord.objects.get(name="llm-serve-5c8d9f6b7a-r9t2w")
    assert (again.pk, again.end) == (first.pk, at("2025-07-11T10:00:00Z"))
    # A new pod of the same name (another uid) is not the same pod: its own snapshot time.
    replaced = next(
        item for item in document["items"] if item["metadata"]["name"].endswith("r9t2w")
    )
    replaced["metadata"]["uid"] = "a-new-uid"
    ingest(write(tmp_path / "newer.json", document))
    assert JobRecord.objects.get(name="llm-serve-5c8d9f6b7a-r9t2w").end == at(
        "2025-07-11T11:00:00Z"
    )


# --- 10. run ids of Deployments -----------------------------------------------------------------


def test_a_deployments_pods_are_one_run_across_rollouts() -> None:
    rows = parse(SCENARIO_PODS)
    assert rows["llm-serve-7fb78fb6d8-q2x9z"]["run_id"] == "llm-serve"
    assert rows["llm-serve-5c8d9f6b7a-h7k4p"]["run_id"] == "llm-serve"
    # Other owners are as they were: a Job's name, a run label, the pod.
    assert rows["eval-mmlu-x8d2k"]["run_id"] == "eval-mmlu"
    assert rows["bert-pretrain-master-0"]["run_id"] == "bert-pretrain"
    assert rows["jupyter-alice"]["run_id"] == "jupyter-alice"
    selectors = parse(SHAPES / "time-sharing-selectors.json")
    assert selectors["triton-small-6d4cf56b8d-7hq2x"]["run_id"] == "triton-small"
    assert selectors["whisper-batch-0"]["run_id"] == "whisper-batch"  # a StatefulSet


@pytest.mark.parametrize(
    ("name", "labels", "owner", "expected"),
    [
        # finops.io/run wins over the workload.
        (
            "nginx-7fb78fb6d8-x2b9z",
            {RUN: "chat-v3", HASH: "7fb78fb6d8"},
            "nginx-7fb78fb6d8",
            "chat-v3",
        ),
        ("nginx-7fb78fb6d8-x2b9z", {HASH: "7fb78fb6d8"}, "nginx-7fb78fb6d8", "nginx"),
        # Argo Rollouts label their pods with their own hash.
        ("canary-64f8d7c9b5-q7w2e", {ROLLOUT_HASH: "64f8d7c9b5"}, "canary-64f8d7c9b5", "canary"),
        # A ReplicaSet of no Deployment: no hash label, the name as it is.
        ("nginx-7fb78fb6d8-x2b9z", {}, "nginx-7fb78fb6d8", "nginx-7fb78fb6d8"),
        # An orphaned Deployment pod (its ReplicaSet deleted with --cascade=orphan).
        ("nginx-7fb78fb6d8-x2b9z", {HASH: "7fb78fb6d8"}, None, "nginx"),
    ],
)
def test_the_pod_template_hash_is_stripped_unless_the_run_is_named(
    tmp_path: Path, name: str, labels: dict[str, str], owner: str | None, expected: str
) -> None:
    owners = None if owner is None else [{"kind": "ReplicaSet", "name": owner, "controller": True}]
    item = pod(name, labels=labels, owners=owners)
    (row,) = parse(write(tmp_path / "pods.json", pod_list(item))).values()
    assert row["run_id"] == expected


def test_opencost_and_the_pod_list_name_the_deployment_alike() -> None:
    path = SHAPES / "opencost-llm-serve.json"
    opencost = [row for chunk in parse_allocations(path, file_label=path.name) for row in chunk]
    pods = parse(SCENARIO_PODS)
    assert {row["name"]: row["run_id"] for row in opencost} == {
        "llm-serve-7fb78fb6d8-q2x9z": "llm-serve",
        "llm-serve-5c8d9f6b7a-h7k4p": "llm-serve",
    }
    for row in opencost:
        assert pods[row["name"]]["run_id"] == row["run_id"]


# --- 11. `kubectl get pods -o yaml` ---------------------------------------------------------------


def test_yaml_from_kubectl_reads_as_the_same_pods_as_its_json() -> None:
    from_yaml = parse(SHAPES / "pods-gke.yaml", gpu_sharing_pools={SHARED_POOL: 4})
    from_json = parse(SCENARIO_PODS, gpu_sharing_pools={SHARED_POOL: 4})
    assert len(from_yaml) == 8
    assert from_yaml == from_json


def test_a_single_pod_and_a_stream_of_documents(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: one\n  namespace: vision\n"
        "spec:\n  containers:\n  - name: main\n    resources:\n      limits:\n"
        '        nvidia.com/gpu: "2"\n  nodeName: gpu-node-1\nstatus:\n  phase: Running\n'
        # Written by hand: an unquoted time stays the string the pod reader parses.
        "  startTime: 2025-07-08T10:00:00Z\n"
    )
    (row,) = parse(path).values()
    assert (row["job_id"], row["start"], exact(row)) == (
        "vision/one",
        at("2025-07-08T10:00:00Z"),
        2,
    )
    stream = tmp_path / "pods.yaml"
    stream.write_text(path.read_text() + "---\n" + path.read_text().replace("one", "two"))
    assert sorted(parse(stream)) == ["one", "two"]


@pytest.mark.django_db
def test_the_command_imports_yaml() -> None:
    out = ingest(SHAPES / "pods-gke.yaml", "--gpu-sharing-pool", f"{SHARED_POOL}=4")
    assert "8 pods read, 8 jobs stored" in out
    assert JobRecord.objects.get(name="jupyter-dana").exact_gpus() == Fraction(1, 4)


def test_yaml_past_its_size_bound_asks_for_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubernetes_files, "YAML_MAX_BYTES", 16 * 1024)
    with pytest.raises(ImportFormatError, match="kubectl get pods -A -o json") as info:
        parse(SHAPES / "pods-gke.yaml")
    assert "more than the 0.015625 MiB read as YAML" in str(info.value)
    # JSON of any size is read as before.
    assert len(parse(SCENARIO_PODS)) == 8


def test_an_alias_bomb_is_refused_at_the_first_alias() -> None:
    began = time.monotonic()
    with pytest.raises(ImportFormatError) as info:
        parse(SHAPES / "alias-bomb.yaml")
    assert time.monotonic() - began < 5
    assert "YAML anchors and aliases are not read" in str(info.value)
    assert info.value.row == 9  # the anchor `a: &a [...]` the first alias names
    assert info.value.file == "alias-bomb.yaml"


def test_merge_keys_are_not_expanded(tmp_path: Path) -> None:
    # `<<` merges double at each level: refused like any alias, never flattened first.
    levels = ["a0: &a0 {k: v}"] + [
        f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}" for i in range(1, 40)
    ]
    path = tmp_path / "merge.yaml"
    path.write_text("\n".join([*levels, "<<: *a39", "kind: List", "items: []"]) + "\n")
    began = time.monotonic()
    with pytest.raises(ImportFormatError, match="aliases are not read"):
        parse(path)
    assert time.monotonic() - began < 5


@pytest.mark.parametrize(
    ("text", "message", "row"),
    [
        ("kind: List\nitems:\n- metadata: {name: [x\n", "not valid YAML", 4),
        ("apiVersion: v1\n\titems: []\n", "not valid YAML", 2),
        (
            "NAMESPACE   NAME      READY   STATUS    RESTARTS   AGE\nvision      train-0   1/1     "
            "Running   0          5m\n",
            "expected a pod List as `kubectl get pods -A -o json` (or `-o yaml`) prints it, "
            "found text",
            None,
        ),
        ("", "found an empty file", None),
        ("!!python/object:os.system {}\n", "not valid YAML", 1),
    ],
)
def test_what_is_not_a_yaml_pod_list_is_refused_with_its_place(
    tmp_path: Path, text: str, message: str, row: int | None
) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(text)
    with pytest.raises(ImportFormatError) as info:
        parse(path)
    assert message in str(info.value)
    assert info.value.row == row
    if "YAML" in message:
        assert "kubectl get pods -A -o json" in str(info.value)


def test_json_is_still_read_as_json(tmp_path: Path) -> None:
    # The same List, indented and after a blank line, is JSON (its numbers are not YAML's).
    document = copy.deepcopy(json.loads(SCENARIO_PODS.read_text()))
    path = tmp_path / "pods.json"
    path.write_text("\n\n   " + json.dumps(document))
    assert len(parse(path)) == 8
