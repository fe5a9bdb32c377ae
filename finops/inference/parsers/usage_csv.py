"""Inference usage as CSV, for gateways and load balancers that log requests themselves.

Header row (any order, case-insensitive, UTF-8 with or without BOM), one row per window:
  endpoint            required, the endpoint id (the pods' `finops.io/endpoint` label)
  window_start        required, ISO 8601 with an offset or Z (`2025-09-03T10:00:00Z`)
  window_end          required, after window_start and no later than the next UTC midnight
                      (a window lies within one UTC day, so daily cost joins it exactly)
  requests            required, a whole number
  prompt_tokens       optional, a whole number (empty: 0)
  generation_tokens   optional, a whole number (empty: 0)
  model_name, team, namespace, pod   optional text
Rows with the same endpoint, model, namespace, pod and window_start are an error (which one
would be meant?). Errors name file, line (the header is line 1) and column. A line longer than
FINOPS_MAX_LINE_BYTES fails naming its line, before it is read whole.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from billing_ingest.parsers.bounds import csv_reader
from billing_ingest.parsers.lines import CappedText
from finops.core.errors import ImportFormatError
from finops.core.wording import plural
from finops.inference.parsers.common import BadField, Counts, UsageKey, check_lengths, rows_of
from finops.inference.parsers.common import whole_count as _whole

REQUIRED = ("endpoint", "window_start", "window_end", "requests")
OPTIONAL_COUNTS = ("prompt_tokens", "generation_tokens")
OPTIONAL_TEXT = {"model_name": "model_name", "team": "team_hint", "namespace": "namespace",
                 "pod": "pod"}  # fmt: skip


def _time(value: str, column: str) -> datetime:
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise BadField(column, f"not an ISO 8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise BadField(column, f"time {value!r} has no offset (write Z for UTC)")
    return parsed.astimezone(UTC)


def _window(row: dict[str, str]) -> tuple[datetime, datetime]:
    start = _time(row["window_start"], "window_start")
    end = _time(row["window_end"], "window_end")
    if end <= start:
        raise BadField("window_end", "window_end must be after window_start")
    next_midnight = datetime.combine(start.date(), datetime.min.time(), UTC) + timedelta(days=1)
    if end > next_midnight:
        raise BadField("window_end", "window crosses UTC midnight; split it per day")
    return start, end


def _row_usage(row: dict[str, str]) -> tuple[UsageKey, Counts]:
    endpoint = row["endpoint"].strip()
    if not endpoint:
        raise BadField("endpoint", "missing")
    start, end = _window(row)
    text = {field: (row.get(column) or "").strip() for column, field in OPTIONAL_TEXT.items()}
    key = UsageKey(endpoint=endpoint, window_start=start, window_end=end, **text)
    check_lengths(key)
    counts = Counts()
    if not row["requests"].strip():
        raise BadField("requests", "missing")
    counts.values["requests"] = _whole(row["requests"], "requests")
    for column in OPTIONAL_COUNTS:
        cell = (row.get(column) or "").strip()
        counts.values[column] = _whole(cell, column) if cell else 0
    return key, counts


def _header(reader: Any, file_label: str) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        raise ImportFormatError("empty file: expected a header row", file=file_label) from None
    names = [name.strip().lower() for name in header]
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise ImportFormatError(
            f"missing {plural('column', len(missing))} {', '.join(missing)}",
            file=file_label,
            row=1,
            column=missing[0],
        )
    return names


# (endpoint, model, namespace, pod, window_start): the InferenceUsage unique key within a cluster.
_Ident = tuple[str, str, str, str, datetime]


def _read(path: Path, totals: dict[UsageKey, Counts], seen: dict[_Ident, str]) -> None:
    file_label = str(path)
    try:
        # Lines capped at FINOPS_MAX_LINE_BYTES: one huge line fails naming its line number
        # before it is held in memory whole.
        with CappedText(
            path.open(encoding="utf-8-sig", newline=""), file_label=file_label
        ) as handle:
            reader = csv_reader(handle, file_label=file_label)
            names = _header(reader, file_label)
            for cells in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(names):
                    raise ImportFormatError(
                        f"expected {len(names)} cells, found {len(cells)}", file=file_label,
                        row=line,
                    )  # fmt: skip
                try:
                    key, counts = _row_usage(dict(zip(names, cells, strict=True)))
                except BadField as exc:
                    raise ImportFormatError(
                        str(exc), file=file_label, row=line, column=exc.field_name
                    ) from None
                ident = (key.endpoint, key.model_name, key.namespace, key.pod, key.window_start)
                if ident in seen:
                    raise ImportFormatError(
                        f"same endpoint, model, namespace, pod and window_start as {seen[ident]}",
                        file=file_label, row=line, column="window_start",
                    )  # fmt: skip
                seen[ident] = f"{file_label} line {line}"
                totals[key] = counts
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=file_label) from None
    except csv.Error as exc:
        raise ImportFormatError(f"bad CSV: {exc}", file=file_label) from None


def parse_usage_csv(paths: Sequence[Path]) -> list[dict[str, Any]]:
    totals: dict[UsageKey, Counts] = {}
    seen: dict[_Ident, str] = {}
    for path in paths:
        _read(path, totals, seen)
    return rows_of(totals)
