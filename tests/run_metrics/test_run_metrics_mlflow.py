"""MLflow run metrics (issue 30): the run of fixtures/scenarios/focus-slurm-run-metrics as
mlflow-export-import writes it (fixtures/run_metrics/mlflow-export) and as the tracking server's
REST API answers it (runs/get + metrics/get-history pages, fixtures/run_metrics/mlflow-rest):
the same rows as its generic CSV, and through the command (no --run-id: the run names itself) the
same efficiency."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from finops.core.errors import ImportFormatError
from finops.run_metrics.models import TrainingRun
from finops.run_metrics.parsers import metrics_files, metrics_parser
from finops.run_metrics.parsers.common import MetricRow, RunOptions
from tests.scenario_setup import (
    metric_row_facts,
    run_metrics_scenario_efficiency,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EXPORT = FIXTURES / "run_metrics" / "mlflow-export" / "pretrain" / "run.json"
REST = FIXTURES / "run_metrics" / "mlflow-rest" / "pretrain" / "run.json"
SCENARIO = FIXTURES / "scenarios" / "focus-slurm-run-metrics"


def _csv_rows() -> list[MetricRow]:
    path = SCENARIO / "run-metrics-pretrain.csv"
    return metrics_parser("csv")(path, RunOptions(), str(path)).rows


@pytest.mark.parametrize("path", [EXPORT, REST], ids=["export", "rest"])
def test_both_mlflow_shapes_are_the_csv_rows_with_their_constants(path: Path) -> None:
    parsed = metrics_parser("mlflow")(path, RunOptions(), str(path))
    # Steps in step order, not time order: the resumed attempt's step 260 (11:05) comes before
    # step 300 (10:50) of the first. The stored points are read in time order.
    by_time = sorted(parsed.rows, key=lambda r: r.timestamp)
    assert metric_row_facts(by_time) == metric_row_facts(_csv_rows())
    constants = parsed.constants[("vision", "pretrain")]
    assert (constants.model_params, constants.flops_per_token, constants.dtype) == (
        7_000_000_000, None, "bf16",
    )  # fmt: skip


def test_a_run_folder_is_one_import_of_its_run_json() -> None:
    files = sorted(REST.parent.iterdir())
    assert metrics_files("mlflow", files) == [REST]


def test_mlflow_through_the_command_gives_the_scenario_efficiency(
    finance_api: APIClient, db: None
) -> None:
    quiet = {"stdout": StringIO(), "stderr": StringIO()}
    call_command("ingest_run_metrics", "--format", "mlflow", str(EXPORT.parent), **quiet)
    assert TrainingRun.objects.get().run_id == "pretrain"
    efficiency = run_metrics_scenario_efficiency(finance_api)
    assert efficiency["useful_tokens"] == 524288000
    assert efficiency["cost_per_million_tokens"] == "0.305175781250"
    assert efficiency["mfu"] == "0.386545"


def test_a_run_without_tokens_or_samples_names_what_it_logged(tmp_path: Path) -> None:
    body = json.loads(EXPORT.read_text())
    metrics = body["mlflow"]["metrics"]
    body["mlflow"]["metrics"] = {"train/loss": metrics["train/loss"]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(body))
    with pytest.raises(ImportFormatError, match=r"no tokens or samples metric.*logged: train/loss"):
        metrics_parser("mlflow")(path, RunOptions(), str(path))


def test_a_bad_value_names_file_and_metric(tmp_path: Path) -> None:
    body = json.loads(EXPORT.read_text())
    body["mlflow"]["metrics"]["train/tokens"][2]["value"] = 1.5
    path = tmp_path / "run.json"
    path.write_text(json.dumps(body))
    with pytest.raises(ImportFormatError) as caught:
        metrics_parser("mlflow")(path, RunOptions(), str(path))
    assert caught.value.column == "train/tokens"
    assert "step 150: not a whole number" in str(caught.value)


def test_bad_json_fails_its_import_and_keeps_what_was_there(tmp_path: Path, db: None) -> None:
    quiet = {"stdout": StringIO(), "stderr": StringIO()}
    call_command("ingest_run_metrics", "--format", "mlflow", str(EXPORT), **quiet)
    before = TrainingRun.objects.get().points.count()
    path = tmp_path / "run.json"
    path.write_text('{"mlflow": {"info": ')
    with pytest.raises(CommandError, match=r"bad JSON"):
        call_command("ingest_run_metrics", "--format", "mlflow", str(path), "--run-id",
                     "pretrain", "--team", "vision", **quiet)  # fmt: skip
    assert TrainingRun.objects.get().points.count() == before == 9
