"""Run-metrics log formats (issue 30): torchtitan, Megatron-LM and Lightning CSVLogger output of
the run of fixtures/scenarios/focus-slurm-run-metrics (fixtures/run_metrics/, hand-made in each
tool's real shape) read into the same rows as its generic CSV, and through the command to the
same efficiency."""

from __future__ import annotations

import datetime as dt
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from billing_ingest.models import ImportBatch
from finops.run_metrics.models import RunMetricPoint
from finops.run_metrics.parsers import metrics_parser
from finops.run_metrics.parsers.common import MetricRow, RunOptions
from tests.scenario_setup import (
    metric_row_facts,
    run_metrics_scenario_efficiency,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LOGS = FIXTURES / "run_metrics"
SCENARIO = FIXTURES / "scenarios" / "focus-slurm-run-metrics"
RUN = RunOptions(run_id="pretrain", team="vision")
_ATTEMPTS = ("torchtitan-pretrain-attempt-1.log", "torchtitan-pretrain-attempt-2.log")


def _csv_rows() -> list[MetricRow]:
    path = SCENARIO / "run-metrics-pretrain.csv"
    return metrics_parser("csv")(path, RunOptions(), str(path)).rows


def test_torchtitan_logs_of_both_attempts_are_the_csv_rows() -> None:
    rows = [
        row
        for name in _ATTEMPTS
        for row in metrics_parser("torchtitan")(LOGS / name, RUN, name).rows
    ]
    assert metric_row_facts(rows) == metric_row_facts(_csv_rows())


def test_megatron_log_is_the_csv_rows_with_the_dtype_of_its_arguments() -> None:
    parsed = metrics_parser("megatron")(LOGS / "megatron-pretrain.log", RUN, "megatron.log")
    assert metric_row_facts(parsed.rows) == metric_row_facts(_csv_rows())
    assert parsed.constants[("vision", "pretrain")].dtype == "bf16"


def test_torchtitan_without_the_batch_shape_names_the_step_line(tmp_path: Path) -> None:
    lines = (LOGS / _ATTEMPTS[0]).read_text().splitlines()
    path = tmp_path / "no-init.log"
    path.write_text("\n".join(line for line in lines if "Trainer is initialized" not in line))
    first_step = next(i for i, line in enumerate(lines, start=1) if "step: 50" in line) - 1
    with pytest.raises(Exception, match=rf"row {first_step}, column step: .*--global-batch-size"):
        metrics_parser("torchtitan")(path, RUN, str(path))
    shaped = RunOptions(run_id="pretrain", team="vision", global_batch_size=256, seq_length=4096)
    assert metrics_parser("torchtitan")(path, shaped, str(path)).rows[-1].tokens == 314572800


def test_megatron_iteration_without_its_time_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "old.log"
    path.write_text(
        "  seq_length ...................................... 4096\n"
        " iteration       10/     100 | consumed samples:          640 | elapsed time per "
        "iteration (ms): 1000.0 |\n"
    )
    with pytest.raises(Exception, match="row 2, column timestamp: iteration line without its"):
        metrics_parser("megatron")(path, RUN, str(path))


def test_log_formats_need_a_run_id() -> None:
    with pytest.raises(CommandError, match="needs --run-id"):
        call_command("ingest_run_metrics", "--format", "torchtitan", str(LOGS / _ATTEMPTS[0]))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fmt", "files"), [("torchtitan", _ATTEMPTS), ("megatron", ("megatron-pretrain.log",))]
)
def test_a_log_through_the_command_gives_the_scenario_efficiency(
    fmt: str, files: tuple[str, ...], finance_api: APIClient
) -> None:
    quiet = {"stdout": StringIO(), "stderr": StringIO()}
    for name in files:
        call_command(
            "ingest_run_metrics", "--format", fmt, str(LOGS / name), "--run-id", "pretrain",
            "--team", "vision", "--model-params", "7000000000", **quiet,
        )  # fmt: skip
    efficiency = run_metrics_scenario_efficiency(finance_api)
    # fixtures/scenarios/focus-slurm-run-metrics/README.md: 160 USD / 524.288M tokens, and
    # 42e9 x 524,288,000 / (57,600 GPU-s x 989e12).
    assert efficiency["useful_tokens"] == 524288000
    assert efficiency["samples"] == 128000
    assert efficiency["cost_per_million_tokens"] == "0.305175781250"
    assert efficiency["mfu"] == "0.386545"
    assert efficiency["dtype"] == "bf16"


@pytest.mark.django_db
def test_a_folder_is_one_import_batch_and_task_per_file(tmp_path: Path) -> None:
    for name in _ATTEMPTS:
        (tmp_path / name).write_bytes((LOGS / name).read_bytes())
    out = StringIO()
    call_command(
        "ingest_run_metrics", "--format", "torchtitan", str(tmp_path), "--run-id", "pretrain",
        "--team", "vision", stdout=out,
    )  # fmt: skip
    batches = ImportBatch.objects.filter(kind="run_metrics").order_by("id")
    assert [Path(b.file_name).name for b in batches] == list(_ATTEMPTS)
    assert [b.row_count for b in batches] == [5, 4]
    assert {b.status for b in batches} == {"succeeded"}
    assert RunMetricPoint.objects.filter(run__run_id="pretrain").count() == 9


LIGHTNING = LOGS / "lightning-pretrain"


def test_lightning_versions_of_both_attempts_are_the_csv_rows() -> None:
    """version_0 logs a Unix `timestamp` and samples (tokens = samples x seq_len of
    hparams.yaml); version_1 ThroughputMonitor's `time` from --started-at and `lengths`;
    checkpoints from the ModelCheckpoint file names; the validation row is skipped."""
    parse = metrics_parser("lightning")
    first = parse(LIGHTNING / "version_0" / "metrics.csv", RUN, "v0")
    started = RunOptions(
        run_id="pretrain", team="vision", started_at=dt.datetime(2025, 6, 3, 11, tzinfo=dt.UTC)
    )
    second = parse(LIGHTNING / "version_1" / "metrics.csv", started, "v1")
    assert metric_row_facts(first.rows + second.rows) == metric_row_facts(_csv_rows())
    constants = first.constants[("vision", "pretrain")]
    assert (constants.model_params, constants.dtype) == (7000000000, "bf16")


def test_lightning_without_a_time_names_the_header(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,step,train_loss,samples\n0,50,7.1,12800\n")
    with pytest.raises(Exception, match="row 1, column timestamp: no wall-clock time"):
        metrics_parser("lightning")(path, RUN, str(path))


@pytest.mark.django_db
def test_a_lightning_folder_imports_its_metrics_files_only() -> None:
    call_command(
        "ingest_run_metrics", "--format", "lightning", str(LIGHTNING / "version_0"),
        "--run-id", "pretrain", "--team", "vision", stdout=StringIO(),
    )  # fmt: skip
    batch = ImportBatch.objects.get(kind="run_metrics")
    assert (Path(batch.file_name).name, batch.row_count) == ("metrics.csv", 5)
