"""`ingest_utilisation --format prometheus`: dcgm-exporter utilisation per job from text scrapes
and query_range JSON, joined to Slurm jobs and Kubernetes pods, stored like the CSV import, and
charged by the `used` basis. Expected means are computed by hand in each test."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from billing_ingest.models import CostLineItem, ImportBatch, JobGpuUtilisation, JobRecord
from billing_ingest.parsers import prometheus_text
from finops.attribution.models import AllocatedCost, ChargeBasis
from finops.inference.parsers import common as inference_common

pytestmark = pytest.mark.django_db

ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL = "DCGM_FI_DEV_GPU_UTIL"
T0 = dt.datetime(2025, 6, 3, 10, tzinfo=dt.UTC)
SACCT_HEADER = "JobID|JobIDRaw|JobName|Account|User|Partition|State|Start|End|AllocTRES|NodeList"


def gpu_labels(gpu: int, *, host: str = "gpu-node-1", **workload: str) -> str:
    """The labels dcgm-exporter puts on a GPU's series, then the workload labels."""
    base = {
        "gpu": str(gpu),
        "UUID": f"GPU-{gpu:04d}-6c3b-5ab1-8a1e-{host}",
        "pci_bus_id": f"00000000:{gpu + 7:02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": host,
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        **workload,
    }
    return ",".join(f'{k}="{v}"' for k, v in base.items())


def scrape(samples: list[tuple[str, str, str]]) -> str:
    """One /metrics response: HELP/TYPE lines and `metric{labels} value` (no timestamps, as
    dcgm-exporter prints them), plus a metric the reader skips."""
    lines = [
        "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).",
        "# TYPE DCGM_FI_DEV_SM_CLOCK gauge",
        'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-0"} 1980',
        f"# HELP {ENGINE} Ratio of time the graphics engine is active.",
        f"# TYPE {ENGINE} gauge",
        f"# HELP {UTIL} GPU utilization (in %).",
        f"# TYPE {UTIL} gauge",
    ]
    lines += [f"{metric}{{{labels}}} {value}" for metric, labels, value in samples]
    return "\n".join(lines) + "\n"


def matrix(*series: tuple[dict[str, str], list[tuple[int, str]]], metric: str = ENGINE) -> str:
    """A /api/v1/query_range response: each series' labels and (unix seconds, value) pairs."""
    result: list[dict[str, Any]] = [
        {"metric": {"__name__": metric, **labels}, "values": [[t, v] for t, v in values]}
        for labels, values in series
    ]
    document = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return json.dumps(document, indent=1)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def ingest(path: Path, cluster: str, fmt: str = "prometheus") -> str:
    out = StringIO()
    call_command("ingest_utilisation", "--format", fmt, str(path), "--cluster", cluster, stdout=out)
    return out.getvalue()


def stored(cluster: str) -> dict[str, Decimal]:
    return dict(
        JobGpuUtilisation.objects.filter(cluster=cluster).values_list("job_id", "utilisation")
    )


def sacct(tmp_path: Path, cluster: str, *rows: str) -> None:
    path = write(tmp_path, f"sacct-{cluster}.txt", "\n".join([SACCT_HEADER, *rows]) + "\n")
    call_command(
        "ingest_jobs", "--format", "slurm", str(path), "--cluster", cluster, "--no-attribute",
        stdout=StringIO(),
    )  # fmt: skip


def secs(minutes: int) -> int:
    return int((T0 + dt.timedelta(minutes=minutes)).timestamp())


# --- text scrapes: pods, GPUs, averaging ----------------------------------------------------


def test_concatenated_scrapes_average_every_sample_of_every_gpu_of_a_pod(tmp_path: Path) -> None:
    train = {"container": "main", "namespace": "vision", "pod": "train-0"}
    serve = {"container": "vllm", "namespace": "speech", "pod": "serve-0"}
    first = scrape([
        (ENGINE, gpu_labels(0, **train), "0.9"),
        (ENGINE, gpu_labels(1, **train), "0.7"),
        # GPU_UTIL of a pod with engine activity is not mixed into its mean.
        (UTIL, gpu_labels(0, **train), "100"),
        (UTIL, gpu_labels(2, **serve), "40"),
        (ENGINE, gpu_labels(3), "0.0"),  # a GPU nobody holds
    ])  # fmt: skip
    second = scrape([
        (ENGINE, gpu_labels(0, **train), "0.8"),
        (ENGINE, gpu_labels(1, **train), "0.6"),
        (UTIL, gpu_labels(0, **train), "100"),
        (UTIL, gpu_labels(2, **serve), "60"),
        (ENGINE, gpu_labels(3), "0.0"),
    ])  # fmt: skip
    output = ingest(write(tmp_path, "scrapes.prom", first + second), "gke-1")

    # train-0: 2 GPUs x 2 scrapes = 4 samples: (0.9 + 0.7 + 0.8 + 0.6) / 4 = 3.0 / 4 = 0.75.
    # serve-0: GPU_UTIL only: (40% + 60%) / 2 = 50% = 0.5.
    assert stored("gke-1") == {"vision/train-0": Decimal("0.75"), "speech/serve-0": Decimal("0.5")}
    assert "2 job utilisations stored for cluster gke-1" in output
    # GPU 3's engine series has no job label (GPU 3 of the util metric does not exist).
    assert "1 GPU series without a job label skipped" in output
    batch = ImportBatch.objects.get(kind="utilisation")
    assert (batch.format, batch.source, batch.status, batch.row_count) == (
        "prometheus", "gke-1", "succeeded", 2,
    )  # fmt: skip


def test_labels_prometheus_renamed_on_scrape_win_over_the_exporters_own_pod(tmp_path: Path) -> None:
    # Scraped with honor_labels false, dcgm-exporter's pod/namespace become exported_*, and
    # pod/namespace name the exporter pod itself.
    labels = gpu_labels(
        0, exported_container="main", exported_namespace="nlp", exported_pod="llm-7",
        namespace="gpu-operator", pod="nvidia-dcgm-exporter-x2k9d", job="dcgm-exporter",
    )  # fmt: skip
    old = gpu_labels(1, container_name="main", pod_namespace="nlp", pod_name="llm-8")
    ingest(write(tmp_path, "s.prom", scrape([(ENGINE, labels, "0.4"), (ENGINE, old, "0.2")])), "k")
    assert stored("k") == {"nlp/llm-7": Decimal("0.4"), "nlp/llm-8": Decimal("0.2")}


def test_the_same_timestamped_sample_twice_counts_once(tmp_path: Path) -> None:
    ms = int(T0.timestamp() * 1000)
    labels = gpu_labels(0, namespace="vision", pod="p")
    lines = [f"{ENGINE}{{{labels}}} 0.2 {ms}", f"{ENGINE}{{{labels}}} 0.5 {ms + 15000}"]
    # The second scrape pasted twice: (0.2 + 0.5) / 2 = 0.35, not (0.2 + 0.5 + 0.5) / 3.
    ingest(write(tmp_path, "dup.prom", "\n".join([*lines, lines[1]]) + "\n"), "k")
    assert stored("k") == {"vision/p": Decimal("0.35")}


# --- range JSON: Slurm jobs -----------------------------------------------------------------


def test_range_export_joins_slurm_jobs_and_array_tasks_by_their_raw_id(tmp_path: Path) -> None:
    tres = "billing=16,cpu=16,gres/gpu=2,mem=128G,node=1"
    sacct(
        tmp_path, "hpc1",
        f"1001|1001|train|vision|alice|gpu|COMPLETED|2025-06-03T10:00:00|2025-06-03T11:00:00|"
        f"{tres}|gpu-node-1",
        f"1002_1|1003|sweep|speech|bob|gpu|COMPLETED|2025-06-03T10:00:00|2025-06-03T11:00:00|"
        f"{tres}|gpu-node-2",
    )  # fmt: skip
    scrape_job = {"job": "dcgm", "instance": "gpu-node-1:9400"}  # never a job id
    document = matrix(
        ({"gpu": "0", "hpc_job": "1001", **scrape_job}, [(secs(0), "0.5"), (secs(1), "0.7")]),
        ({"gpu": "1", "hpc_job": "1001", **scrape_job}, [(secs(0), "0.3"), (secs(1), "0.5")]),
        # The array task 1002_1 runs with SLURM_JOB_ID=1003 (its JobIDRaw).
        ({"gpu": "0", "hpc_job": "1003"}, [(secs(0), "0.1"), (secs(1), "0.2"), (secs(2), "0.2")]),
        # A job the logs do not know yet keeps its id; slurm_job_id is read too.
        ({"gpu": "0", "slurm_job_id": "2001"}, [(secs(0), "1")]),
        # Slurm in Kubernetes: the Slurm label wins over the slurmd worker pod.
        ({"gpu": "1", "hpc_job": "2002", "namespace": "slurm", "pod": "worker-0"},
         [(secs(0), "0.25")]),
        ({"gpu": "2", **scrape_job}, [(secs(0), "0")]),
    )  # fmt: skip
    ingest(write(tmp_path, "range.json", document), "hpc1")
    assert stored("hpc1") == {
        # (0.5 + 0.7 + 0.3 + 0.5) / 4 = 2.0 / 4
        "1001": Decimal("0.5"),
        # (0.1 + 0.2 + 0.2) / 3 = 0.5 / 3 = 0.1666666... -> 0.166667 (6 places, half-even)
        "1002_1": Decimal("0.166667"),
        "2001": Decimal("1"),
        "2002": Decimal("0.25"),
    }


def test_the_mean_is_over_samples_so_a_gpu_with_gaps_weighs_by_its_observed_time(
    tmp_path: Path,
) -> None:
    # GPU 0 observed at 3 scrapes, busy; GPU 1 observed once (exporter restarted), idle.
    # Mean of all samples: (1 + 1 + 1 + 0) / 4 = 0.75 (busy GPU-time / observed GPU-time);
    # a mean of per-GPU means would say (1 + 0) / 2 = 0.5.
    document = matrix(
        ({"gpu": "0", "hpc_job": "7"}, [(secs(0), "1"), (secs(1), "1"), (secs(2), "1")]),
        ({"gpu": "1", "hpc_job": "7"}, [(secs(2), "0")]),
    )
    ingest(write(tmp_path, "gaps.json", document), "c")
    assert stored("c") == {"7": Decimal("0.75")}


def test_gpu_util_percentages_in_a_range_export(tmp_path: Path) -> None:
    document = matrix(
        ({"gpu": "0", "namespace": "ml", "pod": "a"}, [(secs(0), "12.5"), (secs(1), "37.5")]),
        metric=UTIL,
    )
    ingest(write(tmp_path, "util.json", document), "k")
    # (12.5 + 37.5) / 2 = 25% = 0.25
    assert stored("k") == {"ml/a": Decimal("0.25")}


def test_csv_and_prometheus_give_the_same_rows_and_replace_per_job(tmp_path: Path) -> None:
    ingest(write(tmp_path, "a.csv", "job_id,utilisation\n1001,50%\n1002,0.25\n"), "c1", "csv")
    document = matrix(
        ({"gpu": "0", "hpc_job": "1001"}, [(secs(0), "0.4"), (secs(1), "0.6")]),
        ({"gpu": "0", "hpc_job": "1002"}, [(secs(0), "0.25")]),
    )
    ingest(write(tmp_path, "a.json", document), "c2")
    assert stored("c1") == stored("c2") == {"1001": Decimal("0.5"), "1002": Decimal("0.25")}
    # A later import replaces the jobs it names and keeps the others, whatever the format.
    ingest(write(tmp_path, "b.json", matrix(({"hpc_job": "1001"}, [(secs(5), "0.9")]))), "c1")
    assert stored("c1") == {"1001": Decimal("0.9"), "1002": Decimal("0.25")}
    # The same bytes again: nothing to do.
    assert "skipped" in ingest(tmp_path / "b.json", "c1")


# --- the used charge basis ------------------------------------------------------------------


def test_used_basis_charges_the_mean_and_a_job_without_samples_as_requested(tmp_path: Path) -> None:
    billing = ImportBatch.objects.create(
        kind="billing", format="focus", source="aws", file_name="f", status="succeeded"
    )
    CostLineItem.objects.create(
        batch=billing, source="aws", billing_period=dt.date(2025, 6, 1),
        billing_period_start=dt.datetime(2025, 6, 1, tzinfo=dt.UTC), provider_name="AWS",
        billing_account_id="111", billing_currency="USD", charge_period_start=T0,
        charge_period_end=T0 + dt.timedelta(hours=1), billed_cost=Decimal(80),
        effective_cost=Decimal(80), resource_name="gpu-node-1", x_instance_type="p5.48xlarge",
    )  # fmt: skip
    tres = "billing=32,cpu=32,gres/gpu=4,mem=256G,node=1"
    sacct(
        tmp_path, "hpc1",
        f"11|11|a|vision|u|gpu|COMPLETED|2025-06-03T10:00:00|2025-06-03T11:00:00|{tres}|gpu-node-1",
        f"12|12|b|speech|u|gpu|COMPLETED|2025-06-03T10:00:00|2025-06-03T11:00:00|{tres}|gpu-node-1",
    )  # fmt: skip
    ChargeBasis.objects.create(cluster="hpc1", basis="used")
    series = [({"gpu": str(g), "hpc_job": "11"}, [(secs(0), "0.9"), (secs(30), "0.6")])
              for g in range(4)]  # fmt: skip
    ingest(write(tmp_path, "u.json", matrix(*series)), "hpc1")
    # Job 11: 4 GPUs x 2 scrapes, (0.9 + 0.6) x 4 / 8 = 0.75. Job 12: no samples, no row.
    assert stored("hpc1") == {"11": Decimal("0.75")}
    call_command("attribute", "--month", "2025-06", stdout=StringIO())

    def cost(job_id: str) -> Decimal:
        job = JobRecord.objects.get(cluster="hpc1", job_id=job_id)
        return sum((r.amount for r in AllocatedCost.objects.filter(job=job)), Decimal(0))

    # $80 for 8 GPU-hours = $10 per GPU-hour. Job 11: 4 GPUs x 0.75 = 3 GPU-hours -> 30.
    # Job 12 (no utilisation): charged as requested, 4 GPU-hours -> 40. Idle: 80 - 70 = 10.
    assert (cost("11"), cost("12")) == (Decimal(30), Decimal(40))
    idle = AllocatedCost.objects.get(category="idle")
    assert (idle.node, idle.amount) == ("gpu-node-1", Decimal(10))
    job11 = AllocatedCost.objects.get(job__job_id="11")
    assert job11.gpu_seconds == 3 * 3600  # the charged (used) GPU-seconds


# --- bad input --------------------------------------------------------------------------------

POD = 'namespace="ml",pod="p"'


@pytest.mark.parametrize(
    ("text", "row", "column", "detail"),
    [
        (f'{ENGINE}{{{POD} 0.5', 2, "labels", "expected , or }"),
        (f'{ENGINE}{{{POD},gpu="0\\q"}} 0.5', 2, "labels", "bad escape"),
        (f"{ENGINE}{{{POD}}} busy", 2, "value", "not a number"),
        (f"{ENGINE}{{{POD}}} NaN", 2, "value", "not finite"),
        (f"{ENGINE}{{{POD}}} 1.5", 2, "value", "not a ratio between 0 and 1"),
        (f"{UTIL}{{{POD}}} 101", 2, "value", "not a percentage between 0 and 100"),
        (f"{ENGINE}{{{POD}}} -0.1", 2, "value", "not a ratio"),
        (f"{ENGINE}{{{POD}}} 0.5 soon", 2, "timestamp", "not a timestamp"),
        (f'{ENGINE}{{gpu="0",pod="p"}} 0.5', 2, "pod", "label pod has no namespace beside it"),
        (f'{ENGINE}{{namespace="x",exported_pod="p"}} 0.5', 2, "exported_pod",
         "has no exported_namespace"),
        (f'{ENGINE}{{{POD}}} 0.5 1748944800000\n{ENGINE}{{{POD}}} 0.6 1748944800000', 3,
         "value", "differs from 0.5 for the same series and time at line 2"),
        ("{bad line", 2, "metric", "expected a metric name"),
    ],
)  # fmt: skip
def test_text_errors_name_file_line_and_field_and_store_nothing(
    tmp_path: Path, text: str, row: int, column: str, detail: str
) -> None:
    path = write(tmp_path, "bad.prom", f"# TYPE {ENGINE} gauge\n{text}\n")
    with pytest.raises(CommandError) as caught:
        ingest(path, "k")
    message = str(caught.value)
    assert f"file {path}, row {row}, column {column}: " in message
    assert detail in message
    assert not JobGpuUtilisation.objects.exists()
    batch = ImportBatch.objects.get(kind="utilisation")
    assert batch.status == "failed"
    assert f"row {row}" in batch.error


def _matrix_doc(result: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


@pytest.mark.parametrize(
    ("document", "column", "detail"),
    [
        ({"status": "error", "error": "bad query"}, "status", "not success"),
        ({"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}},
         "data.resultType", "matrix or vector"),
        (_matrix_doc([{"metric": {"__name__": ENGINE, "hpc_job": "1"},
                       "values": [[1748944800, "0.5"], [1748944860, 0.5]]}]),
         "data.result[0].values[1]", 'expected [unix seconds, "value"]'),
        (_matrix_doc([{"metric": {"__name__": ENGINE, "hpc_job": "1"},
                       "values": [[1748944800, "2"]]}]),
         "data.result[0].values[0]", "not a ratio between 0 and 1"),
        (_matrix_doc([{"metric": {"__name__": ENGINE, "hpc_job": "1"}, "values": []},
                      {"metric": {"__name__": ENGINE, "pod": "p"},
                       "values": [[1748944800, "0.5"]]}]),
         "data.result[1].metric.pod", "label pod has no namespace"),
    ],
)  # fmt: skip
def test_json_errors_name_file_and_path_and_store_nothing(
    tmp_path: Path, document: dict[str, Any], column: str, detail: str
) -> None:
    path = write(tmp_path, "bad.json", json.dumps(document))
    with pytest.raises(CommandError) as caught:
        ingest(path, "k")
    assert f"file {path}, column {column}: " in str(caught.value)
    assert detail in str(caught.value)
    assert not JobGpuUtilisation.objects.exists()
    assert ImportBatch.objects.get(kind="utilisation").status == "failed"


def test_a_file_without_dcgm_samples_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "other.prom", 'vllm:num_requests_running{pod="p"} 3\n')
    with pytest.raises(CommandError, match="has no DCGM_FI_PROF_GR_ENGINE_ACTIVE or"):
        ingest(path, "k")


def test_invalid_json_and_bytes_that_are_not_utf8_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.json", '\n{"status": "success",\n "data": }\n')
    with pytest.raises(CommandError, match=r"broken\.json, row 3: not valid JSON"):
        ingest(path, "k")
    binary = tmp_path / "binary.prom"
    binary.write_bytes(f"{ENGINE}{{{POD}}} 0.5\n".encode() + b"\xff\xfe 0.5\n")
    with pytest.raises(CommandError, match=r"binary\.prom, row 2: not UTF-8 text"):
        ingest(binary, "k")


def test_one_tokenizer_is_shared_with_the_inference_parsers() -> None:
    # billing_ingest may not import finops apps: the tokenizer lives in billing_ingest and the
    # inference parsers use it (and its BadField) from there.
    assert inference_common.BadField is prometheus_text.BadField
