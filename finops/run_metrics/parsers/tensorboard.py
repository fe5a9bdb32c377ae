"""TensorBoard event files (`events.out.tfevents.*`), read with TensorBoard's own loader.

One file per attempt (each process writes its own): every event with a step and scalar values
is a row at its `wall_time` (UTC) and `step`. Progress from the scalar tags `tokens` and
`samples` (also `consumed_tokens`, `num_tokens`, `tokens_seen`, `consumed_samples`,
`num_samples`, with a `train/`, `train_` or `train.` prefix), cumulative as logged; the tag
`checkpoint` = 1 marks a step that saved one. The run and its constants come from the command
line (`--run-id`, `--team`, `--model-params`, `--dtype`): event files do not name the run.

Scalars are what the writer stored: a `simple_value` is a 32-bit float, exact for whole counts
up to 16,777,216 and rounded to the nearest representable value above (at most 1 part in
16,777,216, e.g. 64 tokens in a billion); a tensor scalar written in float64 (PyTorch's
`add_scalar(..., double_precision=True)`) is exact to 2^53.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from finops.core.errors import ImportFormatError
from finops.run_metrics.parsers.common import (
    BadField,
    MetricRow,
    ParsedFile,
    RunOptions,
    checked_run,
    whole,
)

FILE_MARK = "tfevents"
_PREFIXES = ("", "train/", "train_", "train.")
_TOKENS = ("tokens", "consumed_tokens", "num_tokens", "tokens_seen")
_SAMPLES = ("samples", "consumed_samples", "num_samples")


@dataclass(frozen=True, slots=True)
class _Scalar:
    wall_time: float
    step: int
    tag: str
    value: Decimal


def _scalars(path: Path, label: str) -> Iterator[_Scalar]:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    try:
        for event in EventFileLoader(str(path)).Load():
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    number = Decimal(repr(value.simple_value))
                elif kind == "tensor" and value.tensor.tensor_shape.dim == []:
                    number = Decimal(repr(tensor_util.make_ndarray(value.tensor).item()))
                else:
                    continue
                yield _Scalar(event.wall_time, event.step, value.tag, number)
    except Exception as exc:  # the loader raises DataLossError and protobuf DecodeErrors
        raise ImportFormatError(f"not a TensorBoard event file: {exc}", file=label) from None


def _tag(tags: set[str], bases: tuple[str, ...]) -> str | None:
    return next((p + b for b in bases for p in _PREFIXES if p + b in tags), None)


def parse_tensorboard(path: Path, options: RunOptions, label: str) -> ParsedFile:
    scalars = list(_scalars(path, label))
    tags = {s.tag for s in scalars}
    tokens, samples = _tag(tags, _TOKENS), _tag(tags, _SAMPLES)
    if tokens is None and samples is None:
        raise ImportFormatError(
            f"no tokens or samples scalar (one of {', '.join(_TOKENS + _SAMPLES)}); "
            f"the file logged: {', '.join(sorted(tags)) or 'nothing'}", file=label,
        )  # fmt: skip
    try:
        run_id, team = checked_run(options.run_id, options.team)
    except BadField as exc:
        raise ImportFormatError(f"the run: {exc}", file=label, column=exc.field_name) from None
    steps: dict[int, dict[str, _Scalar]] = {}
    for scalar in scalars:
        if scalar.tag in (tokens, samples, "checkpoint"):
            steps.setdefault(scalar.step, {})[scalar.tag] = scalar
    parsed = ParsedFile()
    parsed.add_constants((team, run_id), options.constants())
    for number, step in enumerate(sorted(steps), start=1):
        found = steps[step]
        first = found.get(tokens or "") or found.get(samples or "") or found["checkpoint"]
        parsed.rows.append(
            MetricRow(
                run_id=run_id,
                team=team,
                line=number,
                timestamp=datetime.fromtimestamp(first.wall_time, tz=UTC),
                step=step,
                tokens=_count(found.get(tokens or ""), label, step),
                samples=_count(found.get(samples or ""), label, step),
                checkpoint="checkpoint" in found and found["checkpoint"].value == 1,
            )
        )
    return parsed


def _count(scalar: _Scalar | None, label: str, step: int) -> int | None:
    if scalar is None:
        return None
    try:
        return whole(str(scalar.value), scalar.tag)
    except BadField as exc:
        raise ImportFormatError(f"step {step}: {exc}", file=label, column=scalar.tag) from None
