"""PyTorch Lightning CSVLogger output: a version folder's `metrics.csv`, with `hparams.yaml`
beside it and the ModelCheckpoint files under `checkpoints/`.

metrics.csv has a row per logging call: `step`, `epoch` and the logged metrics (a cell is empty
where that call did not log the metric). Progress is read from:
- samples: `samples` (ThroughputMonitor's cumulative count; `train|samples`, `train/samples`);
- tokens: `tokens`, else ThroughputMonitor's `lengths`, else samples x the sequence length
  (`--seq-length`, else `seq_length`, `seq_len`, `block_size` or `max_seq_length` in
  hparams.yaml);
- time: a `timestamp` column (Unix seconds, as `self.log("timestamp", time.time())` writes),
  else ThroughputMonitor's `time` (seconds since the attempt started) after `--started-at`.
  CSVLogger writes no wall-clock time of its own: a file with neither fails naming its header.
hparams.yaml gives the constants: `model_params` (or `n_params`, `num_params`),
`flops_per_token`, and `dtype` or Lightning's `precision` ("bf16-mixed", "16-mixed", ...).
A checkpoint file named `...step=N...ckpt` under `checkpoints/` marks step N. Rows without
any count (validation rows) are skipped.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from billing_ingest.parsers.lines import CappedText
from finops.core.errors import ImportFormatError
from finops.run_metrics.parsers.common import (
    BadField,
    MetricRow,
    ParsedFile,
    RunConstants,
    RunOptions,
    checked_run,
    dtype_of,
    whole,
)
from finops.run_metrics.parsers.log_lines import mark_checkpoint

PRIMARY_FILE = "metrics.csv"
_PREFIXES = ("", "train|", "train/", "train_")
_SEQ_KEYS = ("seq_length", "seq_len", "block_size", "max_seq_length")
_PARAM_KEYS = ("model_params", "n_params", "num_params")
_CKPT_STEP = re.compile(r"step=(\d+)")


def _column(names: list[str], base: str) -> str | None:
    return next((p + base for p in _PREFIXES if p + base in names), None)


def _hparams(folder: Path) -> dict[str, Any]:
    path = folder / "hparams.yaml"
    if not path.is_file():
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ImportFormatError(f"bad YAML: {exc}", file=str(path)) from None
    return loaded if isinstance(loaded, dict) else {}


def _first_int(values: Mapping[str, Any], keys: tuple[str, ...], label: str) -> int | None:
    for key in keys:
        if values.get(key) not in (None, ""):
            try:
                return whole(str(values[key]), key, positive=True)
            except BadField as exc:
                raise ImportFormatError(str(exc), file=label, column=key) from None
    return None


def _constants(hparams: Mapping[str, Any], options: RunOptions, label: str) -> RunConstants:
    try:
        dtype = options.dtype or dtype_of(
            str(hparams.get("dtype") or hparams.get("precision") or "")
        )
    except BadField as exc:
        raise ImportFormatError(str(exc), file=label, column="precision") from None
    return RunConstants(
        model_params=options.model_params or _first_int(hparams, _PARAM_KEYS, label),
        flops_per_token=options.flops_per_token or _first_int(hparams, ("flops_per_token",), label),
        dtype=dtype,
    )


class _Columns:
    """Which columns of metrics.csv hold what, and how a row's time is read."""

    def __init__(self, names: list[str], options: RunOptions, seq: int | None, label: str) -> None:
        self.samples = _column(names, "samples")
        self.tokens = _column(names, "tokens") or _column(names, "lengths")
        self.seq = seq
        self.timestamp = "timestamp" if "timestamp" in names else None
        self.elapsed = _column(names, "time")
        self.started = options.started_at
        if "step" not in names:
            raise ImportFormatError("missing column step", file=label, row=1, column="step")
        if self.timestamp is None and (self.elapsed is None or self.started is None):
            raise ImportFormatError(
                "no wall-clock time: CSVLogger writes none; log a `timestamp` (Unix seconds), "
                "or give --started-at with ThroughputMonitor's `time`",
                file=label, row=1, column="timestamp",
            )  # fmt: skip
        if self.samples is None and self.tokens is None:
            raise ImportFormatError(
                "needs samples, tokens or lengths", file=label, row=1, column="samples"
            )

    def at(self, cells: Mapping[str, str]) -> datetime | None:
        column = self.timestamp or self.elapsed
        assert column is not None
        text = (cells.get(column) or "").strip()
        if not text:
            return None
        try:
            seconds = Decimal(text)
        except InvalidOperation:
            raise BadField(column, f"not a number: {text!r}") from None
        if self.timestamp:
            return datetime.fromtimestamp(float(seconds), tz=UTC)
        assert self.started is not None
        return self.started + timedelta(seconds=float(seconds))

    def counts(self, cells: Mapping[str, str]) -> tuple[int | None, int | None]:
        samples = _count(cells, self.samples)
        tokens = _count(cells, self.tokens)
        if tokens is None and samples is not None and self.seq:
            tokens = samples * self.seq
        return tokens, samples


def _count(cells: Mapping[str, str], column: str | None) -> int | None:
    if column is None or not (cells.get(column) or "").strip():
        return None
    return whole(cells[column], column)


def parse_lightning(path: Path, options: RunOptions, label: str) -> ParsedFile:
    hparams = _hparams(path.parent)
    constants = _constants(hparams, options, label)
    seq = options.seq_length or _first_int(hparams, _SEQ_KEYS, label)
    run_id, team = checked_run(options.run_id, options.team)
    parsed = ParsedFile()
    try:
        with CappedText(path.open(encoding="utf-8-sig", newline=""), file_label=label) as handle:
            reader = csv.DictReader(handle)
            names = [n.strip() for n in reader.fieldnames or []]
            columns = _Columns(names, options, seq, label)
            for cells in reader:
                row = _row(columns, cells, run_id, team, reader.line_num, label)
                if row is not None:
                    parsed.rows.append(row)
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=label) from None
    except csv.Error as exc:
        raise ImportFormatError(f"bad CSV: {exc}", file=label) from None
    for step in _checkpoint_steps(path.parent):
        mark_checkpoint(parsed.rows, step)
    if parsed.rows:
        parsed.add_constants((team, run_id), constants)
    return parsed


def _row(
    columns: _Columns, cells: dict[str, str], run_id: str, team: str, line: int, label: str
) -> MetricRow | None:
    try:
        tokens, samples = columns.counts(cells)
        if tokens is None and samples is None:
            return None  # a validation or epoch-end row
        at = columns.at(cells)
        if at is None:
            raise BadField(columns.timestamp or columns.elapsed or "timestamp", "missing")
        step = whole(cells.get("step") or "", "step")
    except BadField as exc:
        raise ImportFormatError(str(exc), file=label, row=line, column=exc.field_name) from None
    return MetricRow(run_id, team, line, at, step, tokens, samples, False)


def _checkpoint_steps(folder: Path) -> list[int]:
    checkpoints = folder / "checkpoints"
    if not checkpoints.is_dir():
        return []
    return sorted(
        int(found[1])
        for file in checkpoints.iterdir()
        if file.suffix == ".ckpt" and (found := _CKPT_STEP.search(file.name))
    )
