"""vLLM and Triton counters from Prometheus: text exposition snapshots and `query_range` JSON.

Files (one or many, read together: consecutive scrapes may sit in different files):
- Text exposition (`curl pod:8000/metrics`): `# HELP`/`# TYPE`/other comments ignored, samples
  `name{label="value",...} value [timestamp]`. The timestamp is Prometheus' integer
  milliseconds; a value below 10^11 is read as OpenMetrics seconds (10^11 ms is 1973). A sample
  without one takes the file's modification time: the moment `curl > file` wrote the scrape.
- A Prometheus HTTP API response (`/api/v1/query_range`, resultType matrix, or `/api/v1/query`,
  resultType vector), recognised by its first character `{`: `metric` holds `__name__` and the
  labels, `values` (`value`) the [unix seconds, "value"] pairs.

Counters read (lines of every other metric are skipped unparsed):
  requests           vLLM `vllm:request_success_total` (one series per finished_reason: summed)
                     Triton `nv_inference_request_success`
  inferences         Triton `nv_inference_count`
  prompt_tokens      vLLM `vllm:prompt_tokens_total`
  generation_tokens  vLLM `vllm:generation_tokens_total`

Increases are computed per series (metric name + all labels) between consecutive samples in
time order; a value below the previous one means the counter restarted (pod restart) and the
increase is the new value. A series' first sample only sets the baseline, as in PromQL
`increase()`. The increase observed at sample time t belongs to the UTC hour window
[h, h + 1h) with h < t <= h + 1h: samples taken exactly on the hour close the previous hour, so
a range exported from 10:00 to 11:00 fills the 10:00 window completely.

Series then sum per (endpoint, model, team hint, namespace, pod, window); endpoint, model and
the others come from the labels listed in parsers/common.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from itertools import pairwise
from pathlib import Path
from typing import Any

from billing_ingest.errors import ImportFormatError
from finops.inference.parsers.common import (
    ENDPOINT_LABELS,
    MODEL_LABELS,
    NAMESPACE_LABELS,
    POD_LABELS,
    TEAM_LABELS,
    BadField,
    Counts,
    UsageKey,
    check_lengths,
    first_label,
    merged_team_hints,
    rows_of,
    whole_count,
)

# Metric name -> InferenceUsage count field.
METRICS = {
    "vllm:request_success_total": "requests",
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "nv_inference_request_success": "requests",
    "nv_inference_count": "inferences",
}

HOUR_MS = 3_600_000
# Below this a timestamp is seconds (OpenMetrics), not milliseconds (module docstring).
_SECONDS_BELOW = 10**11
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}

SeriesId = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int
    value: Decimal
    file: str
    line: int | None
    where: str  # the field (text) or JSON path, for errors


# --- text exposition ----------------------------------------------------------------------------


def _labels(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Parse `{a="b",...}` starting at text[pos] == "{"; return labels and the index after "}"."""
    labels: dict[str, str] = {}
    pos += 1
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == "}":
            return labels, pos + 1
        match = _LABEL_NAME.match(text, pos)
        if match is None:
            raise BadField("labels", f"bad label name at character {pos + 1}")
        name = match.group()
        pos = match.end()
        if text[pos : pos + 2] != '="':
            raise BadField("labels", f'label {name}: expected ="value"')
        value, pos = _quoted(text, pos + 2, name)
        if name in labels:
            raise BadField("labels", f"label {name} given twice")
        labels[name] = value
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
        elif pos >= len(text) or text[pos] != "}":
            raise BadField("labels", "expected , or } after a label")


def _quoted(text: str, pos: int, name: str) -> tuple[str, int]:
    chars: list[str] = []
    while pos < len(text):
        char = text[pos]
        if char == '"':
            return "".join(chars), pos + 1
        if char == "\\":
            escaped = _ESCAPES.get(text[pos + 1 : pos + 2])
            if escaped is None:
                raise BadField("labels", f"label {name}: bad escape")
            chars.append(escaped)
            pos += 2
            continue
        chars.append(char)
        pos += 1
    raise BadField("labels", f"label {name}: unterminated value")


def _value(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise BadField("value", f"not a number: {text!r}") from None
    if not value.is_finite():
        raise BadField("value", f"counter value {text!r} is not finite")
    return value


def _timestamp_ms(text: str | Decimal, field_name: str) -> int:
    try:
        number = text if isinstance(text, Decimal) else Decimal(text)
    except InvalidOperation:
        raise BadField(field_name, f"not a timestamp: {text!r}") from None
    if not number.is_finite() or number <= 0:
        raise BadField(field_name, f"not a timestamp: {text!r}")
    ms = int(number * 1000) if number < _SECONDS_BELOW else int(number)
    try:
        _as_datetime(ms)
    except (OverflowError, ValueError):
        raise BadField(field_name, f"timestamp out of range: {text!r}") from None
    return ms


def _text_line(line: str, default_ms: int) -> tuple[str, dict[str, str], int, Decimal] | None:
    """(metric, labels, time in ms, value) of a counter we read, else None."""
    match = _NAME.match(line)
    if match is None:
        raise BadField("metric", "expected a metric name")
    name = match.group()
    if name not in METRICS:
        return None
    pos = match.end()
    labels: dict[str, str] = {}
    if pos < len(line) and line[pos] == "{":
        labels, pos = _labels(line, pos)
    parts = line[pos:].split()
    if not parts or len(parts) > 2:
        raise BadField("value", "expected `value [timestamp]` after the metric")
    value = _value(parts[0])
    at_ms = _timestamp_ms(parts[1], "timestamp") if len(parts) == 2 else default_ms
    return name, labels, at_ms, value


def _read_text(path: Path, file_label: str, text: str, out: dict[SeriesId, list[Sample]]) -> None:
    default_ms = int(path.stat().st_mtime * 1000)
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parsed = _text_line(line, default_ms)
        except BadField as exc:
            raise ImportFormatError(
                str(exc), file=file_label, row=number, column=exc.field_name
            ) from None
        if parsed is None:
            continue
        name, labels, at_ms, value = parsed
        out.setdefault(_series_id(name, labels), []).append(
            Sample(at_ms, value, file_label, number, "value")
        )


# --- HTTP API JSON ------------------------------------------------------------------------------


def _read_json(file_label: str, text: str, out: dict[SeriesId, list[Sample]]) -> None:
    try:
        document = json.loads(text, parse_float=Decimal, parse_int=Decimal)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"not valid JSON: {exc.msg} (column {exc.colno})", file=file_label, row=exc.lineno
        ) from None
    result_type, results = _api_results(document, file_label)
    for index, series in enumerate(results):
        path = f"data.result[{index}]"
        try:
            _json_series(series, path, result_type, file_label, out)
        except BadField as exc:
            raise ImportFormatError(str(exc), file=file_label, column=exc.field_name) from None


def _api_results(document: Any, file_label: str) -> tuple[str, list[Any]]:
    if not isinstance(document, dict):
        raise ImportFormatError("expected a Prometheus API response object", file=file_label)
    if document.get("status") != "success":
        detail = document.get("error") or document.get("status")
        raise ImportFormatError(
            f"Prometheus API status is not success: {detail!r}", file=file_label, column="status"
        )
    data = document.get("data")
    if not isinstance(data, dict):
        raise ImportFormatError("missing data object", file=file_label, column="data")
    result_type = data.get("resultType")
    results = data.get("result")
    if result_type not in ("matrix", "vector") or not isinstance(results, list):
        raise ImportFormatError(
            f"expected resultType matrix or vector with a result array, found {result_type!r}",
            file=file_label,
            column="data.resultType",
        )
    return str(result_type), results


def _json_series(
    series: Any, path: str, result_type: str, file_label: str, out: dict[SeriesId, list[Sample]]
) -> None:
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        raise BadField(path, "expected an object with a metric object")
    metric = series["metric"]
    if not all(isinstance(v, str) for v in metric.values()):
        raise BadField(f"{path}.metric", "label values must be strings")
    labels = {str(k): v for k, v in metric.items() if k != "__name__"}
    name = metric.get("__name__", "")
    if name not in METRICS:
        return
    if result_type == "matrix":
        pairs = series.get("values")
        pairs_path = f"{path}.values"
        if not isinstance(pairs, list):
            raise BadField(pairs_path, "expected an array of [time, value] pairs")
    else:
        pairs, pairs_path = [series.get("value")], f"{path}.value"
    samples = out.setdefault(_series_id(name, labels), [])
    for i, pair in enumerate(pairs):
        where = f"{pairs_path}[{i}]" if result_type == "matrix" else pairs_path
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str)):
            raise BadField(where, 'expected [unix seconds, "value"]')
        if not isinstance(pair[0], Decimal):
            raise BadField(where, "expected a number of seconds")
        at_ms = _timestamp_ms(pair[0] * 1000, where)
        try:
            value = _value(pair[1])
        except BadField as exc:
            raise BadField(where, str(exc)) from None
        samples.append(Sample(at_ms, value, file_label, None, where))


# --- increases and windows ----------------------------------------------------------------------


def _series_id(name: str, labels: dict[str, str]) -> SeriesId:
    return name, tuple(sorted(labels.items()))


def _as_datetime(ms: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def _error(sample: Sample, message: str) -> ImportFormatError:
    return ImportFormatError(message, file=sample.file, row=sample.line, column=sample.where)


def _ordered(samples: list[Sample]) -> list[Sample]:
    """Time order; the same sample read twice (overlapping exports) counts once, two different
    values at one instant are an error."""
    ordered: list[Sample] = []
    for sample in sorted(samples, key=lambda s: s.at_ms):
        if ordered and ordered[-1].at_ms == sample.at_ms:
            if ordered[-1].value != sample.value:
                raise _error(
                    sample,
                    f"value {sample.value} differs from {ordered[-1].value} at the same time "
                    f"in {ordered[-1].file}",
                )
            continue
        ordered.append(sample)
    return ordered


def increases(samples: Sequence[Sample]) -> Iterator[tuple[int, Decimal]]:
    """(time of the later sample in ms, increase) for each consecutive pair; a drop is a
    counter reset and the increase is the new value."""
    for previous, current in pairwise(samples):
        delta = current.value - previous.value
        yield current.at_ms, (current.value if delta < 0 else delta)


def window_of(at_ms: int) -> tuple[datetime, datetime]:
    """The hour (h, h + 1h] that a sample at `at_ms` closes, as [start, end)."""
    start_ms = ((at_ms - 1) // HOUR_MS) * HOUR_MS
    return _as_datetime(start_ms), _as_datetime(start_ms + HOUR_MS)


def _usage_key(labels: dict[str, str], window: tuple[datetime, datetime]) -> UsageKey:
    endpoint = first_label(labels, ENDPOINT_LABELS)
    if not endpoint:
        raise BadField("labels", f"no endpoint label (one of {', '.join(ENDPOINT_LABELS)})")
    key = UsageKey(
        endpoint=endpoint,
        model_name=first_label(labels, MODEL_LABELS),
        team_hint=first_label(labels, TEAM_LABELS),
        namespace=first_label(labels, NAMESPACE_LABELS),
        pod=first_label(labels, POD_LABELS),
        window_start=window[0],
        window_end=window[1],
    )
    check_lengths(key)
    return key


def usage_totals(series: dict[SeriesId, list[Sample]]) -> dict[UsageKey, Counts]:
    totals: dict[UsageKey, Counts] = {}
    for (name, label_items), raw in series.items():
        samples = _ordered(raw)
        if not samples:
            continue
        labels = dict(label_items)
        count_field = METRICS[name]
        for sample in samples:
            try:
                whole_count(sample.value, "value")
                if sample is samples[0]:
                    _usage_key(labels, window_of(sample.at_ms))  # label errors name a line
            except BadField as exc:
                # Text: the field on the named line; JSON: the path of the sample.
                column = exc.field_name if sample.line is not None else sample.where
                raise ImportFormatError(
                    str(exc), file=sample.file, row=sample.line, column=column
                ) from None
        for at_ms, increase in increases(samples):
            key = _usage_key(labels, window_of(at_ms))
            counts = totals.setdefault(key, Counts())
            counts.values[count_field] += int(increase)
    return totals


# --- entry point --------------------------------------------------------------------------------


def _read_file(path: Path, out: dict[SeriesId, list[Sample]]) -> None:
    file_label = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=file_label) from None
    if text.lstrip().startswith("{"):
        _read_json(file_label, text, out)
    else:
        _read_text(path, file_label, text, out)


def parse_prometheus(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """InferenceUsage field dicts from every file together (module docstring)."""
    series: dict[SeriesId, list[Sample]] = {}
    for path in paths:
        _read_file(path, series)
    return rows_of(merged_team_hints(usage_totals(series)))
