"""`ingest_jobs --format opencost`: OpenCost /allocation responses as per-pod GPU records."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from billing_ingest.models import JobRecord
from billing_ingest.parsers.opencost import parse_allocations
from billing_ingest.parsers.rows import JobRow
from billing_ingest.parsers.slurm import SacctStats
from finops.core.errors import ImportFormatError

SAMPLE = "kubernetes/opencost_allocation_example_output.json"


def parse(path: Path, stats: SacctStats | None = None) -> list[JobRow]:
    chunks = parse_allocations(path, file_label=path.name, stats=stats)
    return [row for chunk in chunks for row in chunk]


def allocation(
    name: str,
    *,
    namespace: str = "research",
    pod: str | None = None,
    node: str | None = "gpu-node-1",
    gpu_hours: float = 0,
    start: str = "2025-06-03T10:00:00Z",
    end: str = "2025-06-03T12:00:00Z",
    labels: dict[str, str] | None = None,
    controller: str | None = None,
) -> dict[str, Any]:
    properties: dict[str, Any] = {"cluster": "default-cluster", "namespace": namespace}
    if pod is not None:
        properties["pod"] = pod
    if node is not None:
        properties["node"] = node
    if labels is not None:
        properties["labels"] = labels
    if controller is not None:
        properties["controller"] = controller
    return {
        "name": name,
        "properties": properties,
        "window": {"start": "2025-06-03T10:00:00Z", "end": "2025-06-03T12:00:00Z"},
        "start": start,
        "end": end,
        "gpuCount": 0,
        "gpuHours": gpu_hours,
        "gpuCost": 0,
        "totalCost": 1.5,
    }


def response(*windows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"code": 200, "status": "success", "data": list(windows)}


def write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "allocation.json"
    path.write_text(json.dumps(document))
    return path


def test_shared_sample_reads_without_error(samples_dir: Path) -> None:
    path = samples_dir / SAMPLE
    document = json.loads(path.read_text())
    allocations = [a for window in document["data"] if window for a in window.values()]
    expected = sum(
        1
        for a in allocations
        if a.get("properties", {}).get("pod")
        and a["properties"].get("node")
        and a.get("gpuHours", 0) > 0
    )
    stats = SacctStats()
    rows = parse(path, stats)
    assert len(rows) == expected  # the sample is aggregated by namespace and has no GPUs: 0
    assert stats.data_rows == len(allocations)
    assert stats.skipped_not_started == len(allocations) - expected


def test_gpu_pods_become_records_with_gpus_from_gpu_hours(tmp_path: Path) -> None:
    labels = {"finops_io_team": "nlp", "finops_io_run": "llama", "app": "trainer"}
    first = {
        "research/trainer/main": allocation(
            "research/trainer/main", pod="trainer", gpu_hours=3.0, labels=labels,
            start="2025-06-03T10:30:00Z",
        ),
        "research/trainer/sidecar": allocation(
            "research/trainer/sidecar", pod="trainer", gpu_hours=1.0, start="2025-06-03T10:30:00Z",
        ),
        "research": allocation("research", gpu_hours=9.0),  # namespace level: no pod
        "__idle__": allocation("__idle__", namespace="", gpu_hours=5.0),
        "web/frontend": allocation("web/frontend", namespace="web", pod="frontend"),  # no GPU
    }  # fmt: skip
    second = {
        "research/trainer/main": allocation(
            "research/trainer/main", pod="trainer", gpu_hours=4.0, labels=labels,
            start="2025-06-03T12:00:00Z", end="2025-06-03T14:00:00Z",
        ),
    }  # fmt: skip
    stats = SacctStats()
    (row,) = parse(write(tmp_path, response(first, second)), stats)
    # 3 + 1 + 4 GPU-hours over 10:30-14:00 (3.5 h).
    assert row["gpus"] == (Decimal(8) / Decimal("3.5")).quantize(Decimal("0.000001"))
    assert row["start"] == dt.datetime(2025, 6, 3, 10, 30, tzinfo=dt.UTC)
    assert row["end"] == dt.datetime(2025, 6, 3, 14, tzinfo=dt.UTC)
    assert (row["job_id"], row["nodes"], row["namespace"]) == (
        "research/trainer", ["gpu-node-1"], "research",
    )  # fmt: skip
    assert (row["account"], row["run_id"], row["state"]) == ("nlp", "llama", "UNKNOWN")
    assert row["gpu_numerator"] is None
    assert row["gpu_denominator"] is None
    assert (stats.data_rows, stats.jobs, stats.skipped_not_started) == (6, 1, 3)


def test_run_falls_back_to_controller_then_pod_and_account_to_namespace(tmp_path: Path) -> None:
    window = {
        "a": allocation("a", pod="job-x-abc", gpu_hours=2.0, controller="job-x"),
        "b": allocation("b", pod="lonely", gpu_hours=2.0),
    }
    rows = {r["name"]: r for r in parse(write(tmp_path, response(window)))}
    assert rows["job-x-abc"]["run_id"] == "job-x"
    assert rows["lonely"]["run_id"] == "lonely"
    assert rows["lonely"]["account"] == "research"
    assert rows["lonely"]["gpus"] == Decimal("1.000000")


def test_a_pod_seen_on_two_nodes_gets_one_record_per_node(tmp_path: Path) -> None:
    first = {"p": allocation("p", pod="p", gpu_hours=2.0, node="n1")}
    second = {
        "p": allocation(
            "p", pod="p", gpu_hours=2.0, node="n2",
            start="2025-06-03T12:00:00Z", end="2025-06-03T14:00:00Z",
        )
    }  # fmt: skip
    rows = parse(write(tmp_path, response(first, second)))
    assert sorted(r["job_id"] for r in rows) == ["research/p@n1", "research/p@n2"]


def test_bad_number_names_file_and_path(tmp_path: Path) -> None:
    bad = allocation("p", pod="p")
    bad["gpuHours"] = "lots"
    with pytest.raises(ImportFormatError) as info:
        parse(write(tmp_path, response({"p": bad})))
    assert info.value.file == "allocation.json"
    assert info.value.column == "data[0].p.gpuHours"


def test_not_an_allocation_response_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="`data` array"):
        parse(write(tmp_path, {"kind": "List", "items": []}))


@pytest.mark.django_db
def test_command_stores_the_records(tmp_path: Path) -> None:
    window = {"a": allocation("a", pod="trainer", gpu_hours=4.0)}
    out = StringIO()
    call_command(
        "ingest_jobs", "--format", "opencost", str(write(tmp_path, response(window))),
        "--cluster", "eks-1", "--no-attribute", stdout=out,
    )  # fmt: skip
    assert "1 allocations read, 1 jobs stored" in out.getvalue()
    job = JobRecord.objects.get()
    assert (job.cluster, job.job_id, job.gpus) == ("eks-1", "research/trainer", Decimal(2))
