"""MLflow runs: a run exported by mlflow-export-import (`run.json`: {"mlflow": {"info",
"params", "metrics", "tags"}}, metrics as name -> [{value, timestamp, step}]), or the tracking
server's REST answers saved as files: `runs/get` (`{"run": {"info", "data"}}`) with the
`metrics/get-history` pages of the run (`{"metrics": [{key, value, timestamp, step}]}`) in the
same folder, named `*history*.json`.

The run: `--run-id`, else the tag `finops.run`, else the run's name (`run_name`,
`mlflow.runName`); the team: `--team`, else the tag `finops.team`. Per step, progress is read from
the metric `tokens` (also `consumed_tokens`, `num_tokens`, `tokens_seen`, with a `train/` or
`train_` prefix) and `samples` (`consumed_samples`, `num_samples`), cumulative as logged; the
step's time is that metric's timestamp (milliseconds since the epoch, UTC). A step where the
metric `checkpoint` is 1 saved one. Constants from the params: `model_params` (`n_params`,
`num_params`, `num_parameters`), `flops_per_token`, `dtype` (or `precision`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

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

PRIMARY_FILE = "run.json"
_PREFIXES = ("", "train/", "train_", "train.")
_TOKENS = ("tokens", "consumed_tokens", "num_tokens", "tokens_seen")
_SAMPLES = ("samples", "consumed_samples", "num_samples")
_PARAM_KEYS = ("model_params", "n_params", "num_params", "num_parameters")


@dataclass(frozen=True, slots=True)
class _Value:
    value: Decimal
    timestamp_ms: int


@dataclass(slots=True)
class _Run:
    info: Mapping[str, Any]
    params: dict[str, str]
    tags: dict[str, str]
    # metric name -> step -> the last value logged at that step
    metrics: dict[str, dict[int, _Value]]


def _load(path: Path, label: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=label) from None
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"bad JSON: {exc.msg}", file=label, row=exc.lineno) from None


def _pairs(items: Any) -> dict[str, str]:
    """MLflow's {key: value} (export) or [{"key", "value"}] (REST) as a dict of text."""
    if isinstance(items, Mapping):
        return {str(k): str(v) for k, v in items.items()}
    if isinstance(items, list):
        return {
            str(i["key"]): str(i.get("value", ""))
            for i in items
            if isinstance(i, Mapping) and "key" in i
        }
    return {}


def _number(raw: Any, label: str, column: str) -> Decimal:
    try:
        number = Decimal(str(raw))
    except InvalidOperation:
        raise ImportFormatError(f"not a number: {raw!r}", file=label, column=column) from None
    if not number.is_finite():
        raise ImportFormatError(f"not a finite number: {raw!r}", file=label, column=column)
    return number


def _add_points(
    metrics: dict[str, dict[int, _Value]], name: str, points: Iterable[Any], label: str
) -> None:
    for point in points:
        if not isinstance(point, Mapping):
            raise ImportFormatError("a metric point is not an object", file=label, column=name)
        try:
            step = int(point.get("step", 0))
            stamp = int(point["timestamp"])
        except (KeyError, TypeError, ValueError):
            raise ImportFormatError(
                "a metric point needs a whole step and timestamp", file=label, column=name
            ) from None
        value = _number(point.get("value"), label, name)
        metrics.setdefault(name, {})[step] = _Value(value, stamp)


def _exported(body: Mapping[str, Any], label: str) -> _Run:
    mlflow = body["mlflow"]
    metrics: dict[str, dict[int, _Value]] = {}
    for name, points in (mlflow.get("metrics") or {}).items():
        _add_points(metrics, str(name), points if isinstance(points, list) else [], label)
    return _Run(mlflow.get("info") or {}, _pairs(mlflow.get("params")),
                _pairs(mlflow.get("tags")), metrics)  # fmt: skip


def _rest(body: Mapping[str, Any], folder: Path, label: str) -> _Run:
    run = body["run"]
    data = run.get("data") or {}
    metrics: dict[str, dict[int, _Value]] = {}
    for latest in data.get("metrics") or []:  # the latest values; the history adds the rest
        if isinstance(latest, Mapping) and "key" in latest:
            _add_points(metrics, str(latest["key"]), [latest], label)
    for page in sorted(folder.glob("*history*.json")):
        history = _load(page, str(page))
        points = history.get("metrics") if isinstance(history, Mapping) else None
        for point in points or []:
            if isinstance(point, Mapping) and "key" in point:
                _add_points(metrics, str(point["key"]), [point], str(page))
    return _Run(run.get("info") or {}, _pairs(data.get("params")), _pairs(data.get("tags")),
                metrics)  # fmt: skip


def _metric(metrics: Mapping[str, dict[int, _Value]], bases: tuple[str, ...]) -> str | None:
    return next((p + b for b in bases for p in _PREFIXES if p + b in metrics), None)


def _constants(run: _Run, options: RunOptions, label: str) -> RunConstants:
    params = run.params
    model_params = options.model_params
    try:
        if model_params is None:
            key = next((k for k in _PARAM_KEYS if params.get(k)), None)
            model_params = whole(params[key], key, positive=True) if key else None
        flops = options.flops_per_token
        if flops is None and params.get("flops_per_token"):
            flops = whole(params["flops_per_token"], "flops_per_token", positive=True)
        dtype = options.dtype or dtype_of(params.get("dtype") or params.get("precision"))
    except BadField as exc:
        raise ImportFormatError(f"param {exc}", file=label, column=exc.field_name) from None
    return RunConstants(model_params, flops, dtype)


def parse_mlflow(path: Path, options: RunOptions, label: str) -> ParsedFile:
    body = _load(path, label)
    if isinstance(body, Mapping) and isinstance(body.get("mlflow"), Mapping):
        run = _exported(body, label)
    elif isinstance(body, Mapping) and isinstance(body.get("run"), Mapping):
        run = _rest(body, path.parent, label)
    else:
        raise ImportFormatError(
            'neither an mlflow-export-import run.json ({"mlflow": ...}) nor a runs/get '
            'answer ({"run": ...})', file=label,
        )  # fmt: skip
    name = (
        options.run_id
        or run.tags.get("finops.run")
        or str(run.info.get("run_name") or "")
        or run.tags.get("mlflow.runName", "")
    )
    try:
        run_id, team = checked_run(name, options.team or run.tags.get("finops.team", ""))
    except BadField as exc:
        raise ImportFormatError(f"the run: {exc}", file=label, column=exc.field_name) from None
    tokens = _metric(run.metrics, _TOKENS)
    samples = _metric(run.metrics, _SAMPLES)
    if tokens is None and samples is None:
        raise ImportFormatError(
            f"no tokens or samples metric (one of {', '.join(_TOKENS + _SAMPLES)}); "
            f"the run logged: {', '.join(sorted(run.metrics)) or 'nothing'}", file=label,
        )  # fmt: skip
    parsed = ParsedFile()
    parsed.add_constants((team, run_id), _constants(run, options, label))
    checkpoints = run.metrics.get("checkpoint", {})
    steps = sorted(set(run.metrics.get(tokens or "", {})) | set(run.metrics.get(samples or "", {})))
    for number, step in enumerate(steps, start=1):
        parsed.rows.append(_row(run, run_id, team, step, number, (tokens, samples),
                                checkpoints, label))  # fmt: skip
    return parsed


def _count(value: _Value | None, label: str, column: str, step: int) -> int | None:
    if value is None:
        return None
    try:
        return whole(str(value.value), column)
    except BadField as exc:
        raise ImportFormatError(f"step {step}: {exc}", file=label, column=column) from None


def _row(
    run: _Run, run_id: str, team: str, step: int, number: int,
    names: tuple[str | None, str | None], checkpoints: Mapping[int, _Value], label: str,
) -> MetricRow:  # fmt: skip
    tokens_name, samples_name = names
    token_value = run.metrics.get(tokens_name or "", {}).get(step)
    sample_value = run.metrics.get(samples_name or "", {}).get(step)
    stamp = token_value or sample_value
    assert stamp is not None  # a step is listed because one of them has it
    checkpoint = checkpoints.get(step)
    return MetricRow(
        run_id=run_id,
        team=team,
        line=number,
        timestamp=datetime.fromtimestamp(stamp.timestamp_ms / 1000, tz=UTC),
        step=step,
        tokens=_count(token_value, label, tokens_name or "tokens", step),
        samples=_count(sample_value, label, samples_name or "samples", step),
        checkpoint=checkpoint is not None and checkpoint.value == 1,
    )
