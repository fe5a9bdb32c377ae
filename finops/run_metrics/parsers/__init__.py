"""Run-metrics parsers, one module per format behind a small registry.

A parser reads one file into MetricRow values and per-run constants (parsers/common.py), and
raises finops.core.errors.ImportFormatError naming file, row (line) and column.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from finops.run_metrics.parsers.common import ParsedFile, RunOptions
from finops.run_metrics.parsers.generic_csv import parse_generic_csv
from finops.run_metrics.parsers.lightning import PRIMARY_FILE as LIGHTNING_FILE
from finops.run_metrics.parsers.lightning import parse_lightning
from finops.run_metrics.parsers.megatron import parse_megatron
from finops.run_metrics.parsers.mlflow import PRIMARY_FILE as MLFLOW_FILE
from finops.run_metrics.parsers.mlflow import parse_mlflow
from finops.run_metrics.parsers.tensorboard import FILE_MARK as TENSORBOARD_MARK
from finops.run_metrics.parsers.tensorboard import parse_tensorboard
from finops.run_metrics.parsers.torchtitan import parse_torchtitan

# (path, options from the command line, the file's name for messages) -> rows.
MetricsParser = Callable[[Path, RunOptions, str], ParsedFile]

RUN_METRICS_PARSERS: dict[str, MetricsParser] = {
    "csv": parse_generic_csv,
    "lightning": parse_lightning,
    "megatron": parse_megatron,
    "mlflow": parse_mlflow,
    "tensorboard": parse_tensorboard,
    "torchtitan": parse_torchtitan,
}


def metrics_files(name: str, paths: list[Path]) -> list[Path]:
    """The files of a folder that are imports of their own: for Lightning, its metrics.csv
    files (hparams.yaml and checkpoints beside each are read with it); for MLflow, its run.json
    files (the REST history pages beside one are read with it); else every file."""
    if name == "lightning":
        return [path for path in paths if path.name == LIGHTNING_FILE]
    if name == "mlflow":
        # A run's folder: its run.json (the history pages beside it are read with it).
        return [path for path in paths if path.name == MLFLOW_FILE] or [
            path for path in paths if "history" not in path.name
        ]
    if name == "tensorboard":
        return [path for path in paths if TENSORBOARD_MARK in path.name]
    return paths


def metrics_parser(name: str) -> MetricsParser:
    try:
        return RUN_METRICS_PARSERS[name]
    except KeyError:
        known = ", ".join(sorted(RUN_METRICS_PARSERS))
        raise ValueError(f"unknown run metrics format {name!r}; known: {known}") from None
