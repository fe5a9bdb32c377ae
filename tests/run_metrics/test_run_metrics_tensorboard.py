"""TensorBoard run metrics (issue 30): the run of fixtures/scenarios/focus-slurm-run-metrics as
two attempts' event files (fixtures/run_metrics/tensorboard-pretrain, written with TensorBoard's
own EventFileWriter, as PyTorch's SummaryWriter writes them), read with TensorBoard's loader into
the rows of its generic CSV, and through the command to the same efficiency."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from rest_framework.test import APIClient
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

from finops.core.errors import ImportFormatError
from finops.run_metrics.parsers import metrics_files, metrics_parser
from finops.run_metrics.parsers.common import RunOptions
from tests.scenario_setup import (
    metric_row_facts,
    run_metrics_scenario_efficiency,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EVENTS = FIXTURES / "run_metrics" / "tensorboard-pretrain"
SCENARIO = FIXTURES / "scenarios" / "focus-slurm-run-metrics"
RUN = RunOptions(run_id="pretrain", team="vision")


def test_both_attempts_event_files_are_the_csv_rows() -> None:
    files = metrics_files("tensorboard", sorted(EVENTS.iterdir()))
    assert len(files) == 2
    rows = [row for f in files for row in metrics_parser("tensorboard")(f, RUN, f.name).rows]
    csv = SCENARIO / "run-metrics-pretrain.csv"
    assert metric_row_facts(rows) == metric_row_facts(
        metrics_parser("csv")(csv, RunOptions(), str(csv)).rows
    )


def _write(folder: Path, value: summary_pb2.Summary.Value) -> Path:
    writer = EventFileWriter(str(folder))
    writer.add_event(event_pb2.Event(wall_time=1748944800.0, step=10,
                                     summary=summary_pb2.Summary(value=[value])))  # fmt: skip
    writer.close()
    (path,) = folder.iterdir()
    return path


def test_a_float64_tensor_scalar_is_exact_and_a_float32_one_is_rounded(tmp_path: Path) -> None:
    exact = tmp_path / "double"
    exact.mkdir()
    tensor = tensor_util.make_tensor_proto(np.float64(1_234_567_891))
    path = _write(exact, summary_pb2.Summary.Value(tag="train/tokens", tensor=tensor))
    assert metrics_parser("tensorboard")(path, RUN, path.name).rows[0].tokens == 1_234_567_891
    single = tmp_path / "single"
    single.mkdir()
    path = _write(single, summary_pb2.Summary.Value(tag="tokens", simple_value=16_777_217))
    # 2^24 + 1 has no float32: the writer stored 2^24 (the module's docstring says so).
    assert metrics_parser("tensorboard")(path, RUN, path.name).rows[0].tokens == 16_777_216


def test_a_file_without_progress_names_what_it_logged(tmp_path: Path) -> None:
    path = _write(tmp_path, summary_pb2.Summary.Value(tag="train/loss", simple_value=2.5))
    with pytest.raises(ImportFormatError, match=r"no tokens or samples scalar.*logged: train/loss"):
        metrics_parser("tensorboard")(path, RUN, path.name)


def test_a_file_that_is_not_an_event_file_fails_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "events.out.tfevents.1.host.1.0"
    path.write_bytes(b"\x00\x01 not a record " * 8)
    with pytest.raises(ImportFormatError) as caught:
        metrics_parser("tensorboard")(path, RUN, str(path))
    assert caught.value.file == str(path)


def test_tensorboard_through_the_command_gives_the_scenario_efficiency(
    finance_api: APIClient, db: None
) -> None:
    quiet = {"stdout": StringIO(), "stderr": StringIO()}
    call_command(
        "ingest_run_metrics", "--format", "tensorboard", str(EVENTS), "--run-id", "pretrain",
        "--team", "vision", "--model-params", "7000000000", **quiet,
    )  # fmt: skip
    efficiency = run_metrics_scenario_efficiency(finance_api)
    assert efficiency["useful_tokens"] == 524288000
    assert efficiency["cost_per_million_tokens"] == "0.305175781250"
    assert efficiency["mfu"] == "0.386545"
