"""Prometheus samples from files: the text exposition format and HTTP API JSON responses.

The tokenizer every metrics reader shares (GPU utilisation from DCGM here, vLLM / Triton
counters in finops.inference): it yields raw samples of the metrics a reader asks for and
leaves their meaning (increases, averages, joins) to the reader.

A file is one of:
- Text exposition (`curl host:9400/metrics`, possibly many scrapes concatenated): blank lines
  and `#` lines (`# HELP`, `# TYPE`, other comments) are skipped; a sample is
  `name{label="value",...} value [timestamp]`, label values escaped with `\\\\`, `\\"` and
  `\\n`. The timestamp is Prometheus' integer milliseconds; a value below 10^11 is read as
  OpenMetrics seconds (10^11 ms is 1973). Lines of metrics the reader did not ask for are
  skipped after their name, unparsed (histograms print `+Inf` and `NaN`).
- A Prometheus HTTP API response (`/api/v1/query_range`, resultType matrix, or `/api/v1/query`,
  resultType vector), recognised by its first non-blank character `{`: `metric` holds
  `__name__` and the labels, `values` (`value`) the [unix seconds, "value"] pairs.

Sample values must be finite numbers (`NaN`, `+Inf` are errors for the metrics asked for).
Errors are ImportFormatError naming the file, the line (text) and the field (`metric`,
`labels`, `value`, `timestamp`) or the JSON path of the bad element.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any

from billing_ingest.parsers.bounds import json_loads
from billing_ingest.parsers.lines import capped_binary_lines
from finops.core.errors import ImportFormatError

# Below this a timestamp is seconds (OpenMetrics), not milliseconds (module docstring).
_SECONDS_BELOW = 10**11
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class BadField(ValueError):
    """A bad value in one field; the reader adds file and line."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field_name = field_name


@dataclass(frozen=True, slots=True)
class RawSample:
    name: str
    labels: dict[str, str]
    # Milliseconds since the epoch; None for a text sample printed without a timestamp.
    at_ms: int | None
    value: Decimal
    file: str
    # 1-based line of a text sample; None for JSON.
    line: int | None
    # Where the value sits, for errors about it: `value` (text) or its JSON path.
    where: str


# --- values -------------------------------------------------------------------------------------


def as_datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def parse_value(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise BadField("value", f"not a number: {text!r}") from None
    if not value.is_finite():
        raise BadField("value", f"value {text!r} is not finite")
    return value


def parse_timestamp_ms(text: str | Decimal, field_name: str) -> int:
    """Milliseconds since the epoch (module docstring: seconds below 10^11)."""
    try:
        number = text if isinstance(text, Decimal) else Decimal(text)
    except InvalidOperation:
        raise BadField(field_name, f"not a timestamp: {text!r}") from None
    if not number.is_finite() or number <= 0:
        raise BadField(field_name, f"not a timestamp: {text!r}")
    ms = int(number * 1000) if number < _SECONDS_BELOW else int(number)
    try:
        as_datetime(ms)
    except (OverflowError, ValueError):
        raise BadField(field_name, f"timestamp out of range: {text!r}") from None
    return ms


# --- text exposition ----------------------------------------------------------------------------


def parse_labels(text: str, pos: int) -> tuple[dict[str, str], int]:
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


def parse_sample_line(
    line: str, wanted: Container[str]
) -> tuple[str, dict[str, str], int | None, Decimal] | None:
    """(metric, labels, time in ms or None, value) of a stripped sample line of a wanted
    metric; None for other metrics (not parsed past their name)."""
    match = _NAME.match(line)
    if match is None:
        raise BadField("metric", "expected a metric name")
    name = match.group()
    if name not in wanted:
        return None
    pos = match.end()
    labels: dict[str, str] = {}
    if pos < len(line) and line[pos] == "{":
        labels, pos = parse_labels(line, pos)
    parts = line[pos:].split()
    if not parts or len(parts) > 2:
        raise BadField("value", "expected `value [timestamp]` after the metric")
    value = parse_value(parts[0])
    at_ms = parse_timestamp_ms(parts[1], "timestamp") if len(parts) == 2 else None
    return name, labels, at_ms, value


def text_samples(
    lines: Iterable[tuple[int, str]], *, file_label: str, wanted: Container[str]
) -> Iterator[RawSample]:
    """Samples of the wanted metrics in numbered lines of text exposition."""
    for number, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            parsed = parse_sample_line(line, wanted)
        except BadField as exc:
            raise ImportFormatError(
                str(exc), file=file_label, row=number, column=exc.field_name
            ) from None
        if parsed is not None:
            name, labels, at_ms, value = parsed
            yield RawSample(name, labels, at_ms, value, file_label, number, "value")


# --- HTTP API JSON ------------------------------------------------------------------------------


def json_samples(text: str, *, file_label: str, wanted: Container[str]) -> Iterator[RawSample]:
    """Samples of the wanted metrics in a query_range (matrix) or query (vector) response."""
    try:
        document = json_loads(text, file_label=file_label, parse_float=Decimal, parse_int=Decimal)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"not valid JSON: {exc.msg} (column {exc.colno})", file=file_label, row=exc.lineno
        ) from None
    result_type, results = _api_results(document, file_label)
    for index, series in enumerate(results):
        try:
            path = f"data.result[{index}]"
            yield from _json_series(series, path, result_type, file_label, wanted)
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
    series: Any, path: str, result_type: str, file_label: str, wanted: Container[str]
) -> Iterator[RawSample]:
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        raise BadField(path, "expected an object with a metric object")
    metric = series["metric"]
    if not all(isinstance(v, str) for v in metric.values()):
        raise BadField(f"{path}.metric", "label values must be strings")
    name = metric.get("__name__", "")
    if name not in wanted:
        return
    labels = {str(k): v for k, v in metric.items() if k != "__name__"}
    if result_type == "matrix":
        pairs = series.get("values")
        pairs_path = f"{path}.values"
        if not isinstance(pairs, list):
            raise BadField(pairs_path, "expected an array of [time, value] pairs")
    else:
        pairs, pairs_path = [series.get("value")], f"{path}.value"
    for i, pair in enumerate(pairs):
        where = f"{pairs_path}[{i}]" if result_type == "matrix" else pairs_path
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str)):
            raise BadField(where, 'expected [unix seconds, "value"]')
        if not isinstance(pair[0], Decimal):
            raise BadField(where, "expected a number of seconds")
        at_ms = parse_timestamp_ms(pair[0] * 1000, where)
        try:
            value = parse_value(pair[1])
        except BadField as exc:
            raise BadField(where, str(exc)) from None
        yield RawSample(name, labels, at_ms, value, file_label, None, where)


# --- files --------------------------------------------------------------------------------------


def _numbered(handle: IO[bytes], file_label: str) -> Iterator[tuple[int, str]]:
    """The file's lines numbered from 1, decoded one by one so that a byte that is not UTF-8
    names its own line (a byte order mark before the first is dropped)."""
    for number, raw in capped_binary_lines(handle, file_label=file_label):
        try:
            line = (raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportFormatError(
                f"not UTF-8 text: {exc.reason}", file=file_label, row=number
            ) from None
        yield number, line


def read_samples(path: Path, *, file_label: str, wanted: Container[str]) -> Iterator[RawSample]:
    """Samples of the wanted metrics in one file of either kind (module docstring). Text is
    read line by line, so a month of concatenated scrapes never sits in memory whole."""
    with path.open("rb") as handle:
        lines = _numbered(handle, file_label)
        found = next(((n, line) for n, line in lines if line.strip()), None)
        if found is None:
            return  # an empty file has no samples
        number, first = found
        if not first.lstrip().startswith("{"):
            yield from text_samples(
                _chain_first(found, lines), file_label=file_label, wanted=wanted
            )
            return
        rest = handle.read()
    try:
        text = rest.decode("utf-8")
    except UnicodeDecodeError as exc:
        row = number + rest.count(b"\n", 0, exc.start) + 1
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=file_label, row=row) from None
    # Blank lines before the document keep JSON error line numbers those of the file.
    yield from json_samples(
        "\n" * (number - 1) + first + text, file_label=file_label, wanted=wanted
    )


def _chain_first(
    first: tuple[int, str], rest: Iterator[tuple[int, str]]
) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest
