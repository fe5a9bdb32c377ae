"""What the log-line parsers (torchtitan, Megatron) share: lines read with the length cap and
without terminal colours, the time a line was logged, and the rows they build from steps.

Training logs print wall-clock time without an offset: it is read as UTC (DESIGN section 9: UTC
unless an offset is given), as the clusters' nodes log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from billing_ingest.parsers.lines import CappedText
from finops.core.errors import ImportFormatError
from finops.run_metrics.parsers.common import MetricRow, RunOptions, checked_run

# Terminal colour codes (torchtitan colours its step lines).
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# 2025-06-03 10:05:00, 2025-06-03T10:05:00,123 (logging's asctime), .123456 (Megatron).
TIME = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?"


def log_lines(path: Path, label: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without colours or line ending) of a UTF-8 log."""
    try:
        with CappedText(path.open(encoding="utf-8-sig", newline=""), file_label=label) as handle:
            for number, line in enumerate(handle, start=1):
                yield number, _ANSI.sub("", line).rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=label) from None


def logged_at(whole: str, fraction: str | None) -> datetime:
    """A log's wall-clock time (no offset: UTC); the fraction is milli- or microseconds."""
    parsed = datetime.fromisoformat(whole.replace(" ", "T")).replace(tzinfo=UTC)
    if fraction:
        parsed = parsed.replace(microsecond=int(fraction.ljust(6, "0")))
    return parsed


def step_row(
    options: RunOptions, *, line: int, at: datetime, step: int, samples: int, tokens: int | None
) -> MetricRow:
    run_id, team = checked_run(options.run_id, options.team)
    return MetricRow(
        run_id=run_id, team=team, line=line, timestamp=at, step=step, tokens=tokens,
        samples=samples, checkpoint=False,
    )  # fmt: skip


def mark_checkpoint(rows: list[MetricRow], step: int | None) -> None:
    """Mark the row of `step` (the newest row when None: the step just logged) as checkpointed."""
    for index in range(len(rows) - 1, -1, -1):
        if step is None or rows[index].step == step:
            row = rows[index]
            rows[index] = MetricRow(
                row.run_id, row.team, row.line, row.timestamp, row.step, row.tokens, row.samples,
                True,
            )  # fmt: skip
            return
