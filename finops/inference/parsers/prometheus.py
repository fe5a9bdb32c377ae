"""vLLM and Triton counters from Prometheus: text exposition snapshots and `query_range` JSON.

Files (one or many, read together: consecutive scrapes may sit in different files), read by
the shared tokenizer in billing_ingest/parsers/prometheus_text.py:
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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

from billing_ingest.parsers.prometheus_text import as_datetime, read_samples
from finops.core.errors import ImportFormatError
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

SeriesId = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int
    value: Decimal
    file: str
    line: int | None
    where: str  # the field (text) or JSON path, for errors


# --- increases and windows ----------------------------------------------------------------------


def _series_id(name: str, labels: dict[str, str]) -> SeriesId:
    return name, tuple(sorted(labels.items()))


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
    return as_datetime(start_ms), as_datetime(start_ms + HOUR_MS)


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
    # A text sample without a timestamp was taken when `curl > file` wrote the file.
    default_ms: int | None = None
    for raw in read_samples(path, file_label=str(path), wanted=METRICS):
        at_ms = raw.at_ms
        if at_ms is None:
            if default_ms is None:
                default_ms = int(path.stat().st_mtime * 1000)
            at_ms = default_ms
        out.setdefault(_series_id(raw.name, raw.labels), []).append(
            Sample(at_ms, raw.value, raw.file, raw.line, raw.where)
        )


def parse_prometheus(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """InferenceUsage field dicts from every file together (module docstring)."""
    series: dict[SeriesId, list[Sample]] = {}
    for path in paths:
        _read_file(path, series)
    return rows_of(merged_team_hints(usage_totals(series)))
