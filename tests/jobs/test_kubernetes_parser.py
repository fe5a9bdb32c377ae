"""Kubernetes pod list parser: GPUs (whole, MIG, time-sliced, init containers), states, times,
labels and run ids, and errors that name the file and the JSON path."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from billing_ingest.parsers.kubernetes import parse_pods
from billing_ingest.parsers.kubernetes_gpus import gpu_fraction
from billing_ingest.parsers.rows import JobRow
from billing_ingest.parsers.slurm import SacctStats
from finops.core.errors import ImportFormatError
from tests.builders import container, pod, pod_list


def write(tmp_path: Path, document: Any, name: str = "pods.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document, indent=4))
    return path


def parse(path: Path, **kwargs: Any) -> list[JobRow]:
    return [row for chunk in parse_pods(path, file_label=path.name, **kwargs) for row in chunk]


def one(tmp_path: Path, item: dict[str, Any], **kwargs: Any) -> JobRow:
    (row,) = parse(write(tmp_path, pod_list(item)), **kwargs)
    return row


def exact(row: JobRow) -> Fraction:
    numerator, denominator = row["gpu_numerator"], row["gpu_denominator"]
    assert numerator is not None
    assert denominator is not None
    return Fraction(numerator, denominator)


# --- GPUs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("nvidia.com/mig-1g.5gb", Fraction(1, 7)),
        ("nvidia.com/mig-1g.10gb", Fraction(1, 7)),
        ("nvidia.com/mig-2g.20gb", Fraction(2, 7)),
        ("nvidia.com/mig-3g.40gb", Fraction(3, 7)),
        ("nvidia.com/mig-4g.40gb", Fraction(4, 7)),
        ("nvidia.com/mig-7g.80gb", Fraction(1)),
        ("nvidia.com/mig-1g.10gb.me", Fraction(1, 7)),
        ("nvidia.com/mig-1c.3g.40gb", Fraction(1, 7)),
        # A30: 4 slices.
        ("nvidia.com/mig-1g.6gb", Fraction(1, 4)),
        ("nvidia.com/mig-2g.12gb", Fraction(2, 4)),
        ("nvidia.com/mig-4g.24gb", Fraction(1)),
        # On a node time-sliced 4 ways, a replica under either name is a quarter (issue 24 #7).
        ("nvidia.com/gpu", Fraction(1, 4)),
        ("nvidia.com/gpu.shared", Fraction(1, 4)),
        ("amd.com/gpu", Fraction(1)),
        ("cpu", None),
        ("nvidia.com/gpu.memory", None),
    ],
)
def test_gpu_fraction_of_each_resource(resource: str, expected: Fraction | None) -> None:
    assert gpu_fraction(resource, shared_replicas=4) == expected


def test_a_gpu_is_whole_on_a_node_that_is_not_time_sliced() -> None:
    assert gpu_fraction("nvidia.com/gpu", shared_replicas=1) == 1
    assert gpu_fraction("nvidia.com/gpu.shared", shared_replicas=1) == 1


def test_mig_slice_is_kept_exact_beside_its_six_place_rounding(tmp_path: Path) -> None:
    row = one(tmp_path, pod(containers=[container(**{"nvidia.com/mig-1g.10gb": "1"})]))
    assert exact(row) == Fraction(1, 7)
    assert row["gpus"] == Decimal("0.142857")  # 1/7 = 0.1428571..., half-even to 6 places


def test_mig_slices_of_several_profiles_add_up(tmp_path: Path) -> None:
    row = one(
        tmp_path,
        pod(
            containers=[
                container("a", **{"nvidia.com/mig-3g.40gb": "1"}),
                container("b", **{"nvidia.com/mig-1g.10gb": 2}),
            ]
        ),
    )
    assert exact(row) == Fraction(3, 7) + 2 * Fraction(1, 7)
    assert row["gpus"] == Decimal("0.714286")


def test_time_sliced_gpu_is_one_over_the_cluster_replicas(tmp_path: Path) -> None:
    item = pod(containers=[container(**{"nvidia.com/gpu.shared": "1"})])
    assert exact(one(tmp_path, item, gpu_sharing_replicas=4)) == Fraction(1, 4)
    assert exact(one(tmp_path, item, gpu_sharing_replicas=3)) == Fraction(1, 3)
    assert one(tmp_path, item, gpu_sharing_replicas=3)["gpus"] == Decimal("0.333333")
    # Replicas default to 1: a shared GPU counts whole until the cluster says otherwise.
    assert exact(one(tmp_path, item)) == 1


def test_multi_container_pod_sums_its_containers(tmp_path: Path) -> None:
    item = pod(
        containers=[
            container("trainer", **{"nvidia.com/gpu": "4"}),
            container("eval", **{"nvidia.com/gpu": "2"}),
            container("logger"),  # no GPU
        ]
    )
    row = one(tmp_path, item)
    assert exact(row) == 6
    assert row["gpus"] == Decimal("6.000000")


def test_requests_count_when_limits_do_not_name_the_gpu(tmp_path: Path) -> None:
    c = {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "2"}}}
    assert exact(one(tmp_path, pod(containers=[c]))) == 2


def test_init_container_gpus_count_as_max_not_sum(tmp_path: Path) -> None:
    app = [container(**{"nvidia.com/gpu": "2"})]
    # A smaller init container runs before the app containers: the pod holds 2, not 3.
    small = pod(containers=app, init=[container("warmup", **{"nvidia.com/gpu": "1"})])
    assert exact(one(tmp_path, small)) == 2
    # A bigger one is what the scheduler reserves for the pod's whole life.
    big = pod(containers=app, init=[container("convert", **{"nvidia.com/gpu": "4"})])
    assert exact(one(tmp_path, big)) == 4
    # An init container without GPUs changes nothing.
    plain = pod(containers=app, init=[container("fetch")])
    assert exact(one(tmp_path, plain)) == 2


def test_sidecar_init_container_adds_to_the_app_containers(tmp_path: Path) -> None:
    sidecar = {**container("profiler", **{"nvidia.com/gpu": "1"}), "restartPolicy": "Always"}
    item = pod(containers=[container(**{"nvidia.com/gpu": "2"})], init=[sidecar])
    assert exact(one(tmp_path, item)) == 3


def test_pod_without_gpus_is_stored_with_zero(tmp_path: Path) -> None:
    row = one(tmp_path, pod(containers=[container(cpu="2")]))
    assert row["gpus"] == 0
    assert exact(row) == 0


# --- scheduling, times and states -------------------------------------------------------------


def test_running_pod_has_no_end(tmp_path: Path) -> None:
    row = one(tmp_path, pod())
    assert row["state"] == "RUNNING"
    assert row["start"] == datetime(2025, 6, 3, 10, tzinfo=UTC)
    assert row["end"] is None
    assert row["nodes"] == ["gpu-node-1"]
    assert row["job_id"] == "vision/train-0"
    assert row["job_id_raw"] == "uid-vision-train-0"


def test_succeeded_pod_ends_when_its_last_container_finished(tmp_path: Path) -> None:
    item = pod(
        phase="Succeeded",
        containers=[container("a", **{"nvidia.com/gpu": "1"}), container("b")],
        finished=["2025-06-03T11:00:00Z", "2025-06-03T11:30:15Z"],
    )
    row = one(tmp_path, item)
    assert row["state"] == "COMPLETED"
    assert row["end"] == datetime(2025, 6, 3, 11, 30, 15, tzinfo=UTC)


def test_failed_pod(tmp_path: Path) -> None:
    row = one(tmp_path, pod(phase="Failed", finished=["2025-06-03T14:20:00+02:00"]))
    assert row["state"] == "FAILED"
    assert row["end"] == datetime(2025, 6, 3, 12, 20, tzinfo=UTC)  # offsets become UTC


def test_oom_killed_pod(tmp_path: Path) -> None:
    item = pod(phase="Failed", finished=["2025-06-03T10:20:00Z"], terminated_reasons=["OOMKilled"])
    assert one(tmp_path, item)["state"] == "OUT_OF_MEMORY"


def test_evicted_pod_is_preempted_and_ends_at_its_last_condition(tmp_path: Path) -> None:
    item = pod(phase="Failed", reason="Evicted")
    item["status"]["containerStatuses"] = []  # evicted pods often keep none
    item["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-06-03T09:59:55Z"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "2025-06-03T12:00:00Z"},
    ]
    row = one(tmp_path, item)
    assert row["state"] == "PREEMPTED"
    assert row["end"] == datetime(2025, 6, 3, 12, tzinfo=UTC)


def test_preempted_by_scheduler_is_preempted(tmp_path: Path) -> None:
    item = pod(phase="Failed", finished=["2025-06-03T10:40:00Z"])
    item["status"]["conditions"] = [
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "lastTransitionTime": "2025-06-03T10:39:30Z",
        }
    ]
    assert one(tmp_path, item)["state"] == "PREEMPTED"
    assert one(tmp_path, pod(reason="Preempting"))["state"] == "PREEMPTED"


def test_finished_pod_without_any_time_holds_nothing_rather_than_running_on(
    tmp_path: Path,
) -> None:
    item = pod(phase="Failed")
    item["status"]["containerStatuses"] = []
    row = one(tmp_path, item)
    assert row["end"] == row["start"]


def test_unscheduled_and_unstarted_pods_are_skipped(tmp_path: Path) -> None:
    stats = SacctStats()
    path = write(
        tmp_path,
        pod_list(
            pod("pending", node=None, start=None, phase="Pending"),
            pod("bound", start=None, phase="Pending"),
            pod("ok"),
        ),
    )
    rows = parse(path, stats=stats)
    assert [r["name"] for r in rows] == ["ok"]
    assert (stats.data_rows, stats.jobs, stats.skipped_not_started) == (3, 1, 2)


# --- labels, run, account, endpoint -----------------------------------------------------------


def test_labels_namespace_and_endpoint_are_kept(tmp_path: Path) -> None:
    labels = {"app": "llm", "finops.io/endpoint": "chat-v2"}
    row = one(tmp_path, pod(labels=labels))
    assert row["labels"] == labels
    assert row["namespace"] == "vision"
    assert row["endpoint"] == "chat-v2"


JOB_OWNER = [{"apiVersion": "batch/v1", "kind": "Job", "name": "owner-job", "controller": True}]


@pytest.mark.parametrize(
    ("labels", "owners", "expected"),
    [
        ({"finops.io/run": "llama-7b", "job-name": "j"}, JOB_OWNER, "llama-7b"),
        ({"job-name": "nightly-eval"}, JOB_OWNER, "nightly-eval"),
        ({}, JOB_OWNER, "owner-job"),
        (
            {},
            [
                {"kind": "ConfigMap", "name": "not-the-controller"},
                {"kind": "ReplicaSet", "name": "serve-7d9f", "controller": True},
            ],
            "serve-7d9f",
        ),
        ({}, None, "train-0"),
    ],
)
def test_run_id_precedence(
    tmp_path: Path, labels: dict[str, str], owners: list[dict[str, Any]] | None, expected: str
) -> None:
    assert one(tmp_path, pod(labels=labels, owners=owners))["run_id"] == expected


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"finops.io/team": "nlp", "team": "other"}, "nlp"),
        ({"team": "speech"}, "speech"),
        ({}, "vision"),  # the namespace
    ],
)
def test_account_is_team_label_else_namespace(
    tmp_path: Path, labels: dict[str, str], expected: str
) -> None:
    assert one(tmp_path, pod(labels=labels))["account"] == expected


# --- errors -----------------------------------------------------------------------------------


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "pods.json"
    path.write_text('{"kind": "List",\n "items": [\n {"metadata": }\n]}')
    with pytest.raises(ImportFormatError) as info:
        parse(path)
    assert info.value.file == "pods.json"
    assert info.value.row == 3
    assert "not valid JSON" in str(info.value)


def test_not_a_pod_list_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"kind": "NodeList", "items": []})
    with pytest.raises(ImportFormatError, match="expected kind List or PodList"):
        parse(path)


@pytest.mark.parametrize(
    ("break_it", "path", "message"),
    [
        (
            lambda p: p["status"].update(startTime="yesterday"),
            "items[1].status.startTime",
            "unparseable time",
        ),
        (
            lambda p: p["status"].update(startTime="2025-06-03T10:00:00"),
            "items[1].status.startTime",
            "has no offset",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(
                {"nvidia.com/gpu": "half"}
            ),
            "items[1].spec.containers[0].resources.limits.nvidia.com/gpu",
            "not a whole-number quantity",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(
                {"nvidia.com/mig-9g.90gb": "1"}
            ),
            "items[1].spec.containers[0].resources.limits.nvidia.com/mig-9g.90gb",
            "9 of 7 slices",
        ),
        (lambda p: p["metadata"].pop("namespace"), "items[1].metadata.namespace", "missing"),
        (
            lambda p: p["spec"].update(containers={"name": "x"}),
            "items[1].spec.containers",
            "expected list",
        ),
    ],
)
def test_bad_values_name_file_item_and_field(
    tmp_path: Path, break_it: Any, path: str, message: str
) -> None:
    bad = copy.deepcopy(pod("broken"))
    break_it(bad)
    file = write(tmp_path, pod_list(pod("fine"), bad))
    with pytest.raises(ImportFormatError) as info:
        parse(file)
    assert info.value.file == "pods.json"
    assert info.value.column == path
    assert message in str(info.value)
    assert "pods.json" in str(info.value)
    assert path in str(info.value)
