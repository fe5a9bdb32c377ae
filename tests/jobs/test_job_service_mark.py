"""Service jobs (long-running servers and runners, not training runs) as the job parsers mark
them: Slurm `--comment service=true` (or `finops.service=true`), the pod label
`finops.io/service: "true"` (OpenCost: `finops_io_service`), an inference endpoint's pods; and
the migration that marks the jobs imported before."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps

from billing_ingest.models import ImportBatch, JobRecord
from billing_ingest.parsers.kubernetes import parse_pods
from billing_ingest.parsers.opencost import parse_allocations
from billing_ingest.parsers.slurm_values import is_service
from tests.builders import pod, pod_list


@pytest.mark.parametrize(
    ("comment", "expected"),
    [
        ("service=true", True),
        ("finops.service=true", True),
        ("run=ci-runner service=true", True),
        ("service=TRUE;run=x", True),
        ("run=x,finops.service=true", True),
        ("", False),
        ("run=pretrain", False),
        ("service=false", False),
        ("service=trueish", False),
        ("myservice=true", False),
        ("noservice=true run=x", False),
    ],
)
def test_a_slurm_comment_marks_a_service(comment: str, expected: bool) -> None:
    assert is_service(comment) is expected


def _pods(tmp_path: Path, *items: dict[str, Any]) -> list[Any]:
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pod_list(*items)))
    return [row for chunk in parse_pods(path, file_label=path.name) for row in chunk]


def test_a_pod_label_or_an_endpoint_marks_a_service(tmp_path: Path) -> None:
    rows = _pods(
        tmp_path,
        pod("runner-0", labels={"finops.io/service": "true"}),
        pod("runner-1", labels={"finops.io/service": "True"}),
        pod("train-0", labels={"finops.io/service": "false"}),
        pod("train-1"),
        pod("llm-0", labels={"finops.io/endpoint": "chat"}),
    )
    assert {r["name"]: r["service"] for r in rows} == {
        "runner-0": True, "runner-1": True, "train-0": False, "train-1": False, "llm-0": True,
    }  # fmt: skip


def _allocation(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "properties": {
            "cluster": "default-cluster", "namespace": "ci", "pod": name.split("/")[-1],
            "node": "gpu-node-1", "labels": labels,
        },
        "window": {"start": "2025-06-03T10:00:00Z", "end": "2025-06-03T12:00:00Z"},
        "start": "2025-06-03T10:00:00Z",
        "end": "2025-06-03T12:00:00Z",
        "gpuCount": 1,
        "gpuHours": 2.0,
        "gpuCost": 0,
        "totalCost": 1.5,
    }  # fmt: skip


def test_opencost_reads_the_service_label_in_either_spelling(tmp_path: Path) -> None:
    window = {
        "ci/runner-a": _allocation("ci/runner-a", {"finops_io_service": "true"}),
        "ci/runner-b": _allocation("ci/runner-b", {"finops.io/service": "true"}),
        "ci/train": _allocation("ci/train", {"finops_io_run": "r1"}),
    }
    path = tmp_path / "allocation.json"
    path.write_text(json.dumps({"code": 200, "status": "success", "data": [window]}))
    rows = [row for chunk in parse_allocations(path, file_label=path.name) for row in chunk]
    assert {r["name"]: r["service"] for r in rows} == {
        "runner-a": True, "runner-b": True, "train": False,
    }  # fmt: skip


@pytest.mark.django_db
def test_the_migration_marks_the_services_imported_before() -> None:
    batch = ImportBatch.objects.create(kind="jobs", format="slurm", source="hpc", file_name="x")
    made: dict[str, dict[str, Any]] = {
        "1": {"comment": "run=ci service=true"},
        "2": {"comment": "finops.service=true"},
        "3": {"comment": "run=pretrain"},
        "4": {"comment": "service=false"},
        "ns/a": {"labels": {"finops.io/service": "true"}},
        "ns/b": {"labels": {"finops_io_service": "TRUE"}},
        "ns/c": {"labels": {"finops.io/service": "no"}},
        "ns/d": {"endpoint": "chat"},
        "ns/e": {"labels": {"app": "x"}},
    }
    for job_id, fields in made.items():
        JobRecord.objects.create(batch=batch, cluster="hpc", job_id=job_id, state="COMPLETED",
                                 **fields)  # fmt: skip
    migration = importlib.import_module("billing_ingest.migrations.0019_job_record_service")
    migration._mark_services(apps, None)
    marked = dict(JobRecord.objects.values_list("job_id", "service"))
    assert marked == {
        "1": True, "2": True, "3": False, "4": False, "ns/a": True, "ns/b": True,
        "ns/c": False, "ns/d": True, "ns/e": False,
    }  # fmt: skip
