"""The generic run-metrics CSV (DESIGN section 9), one row per logged step.

Header row (any order, case-insensitive, UTF-8 with or without BOM):
  run_id           required, the run as attribution groups its jobs
  team             optional, the team's slug (where run ids repeat across teams)
  timestamp        required, ISO 8601 (UTC unless it has an offset)
  step             required, a whole number
  tokens, samples  cumulative counts of the run at that step (at least one column; a cell may be
                   empty); after a restart they go back to the checkpoint's values
  checkpoint       optional, 1 where a checkpoint was saved (0, 1, true, false, empty)
  model_params, flops_per_token, dtype   optional, constant per run: the last non-empty wins
The same run and timestamp twice is an error (which row is meant?). Errors name file, row (the
header is row 1) and column.
"""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

from billing_ingest.parsers.lines import CappedText
from finops.core.errors import ImportFormatError
from finops.core.wording import plural
from finops.run_metrics.parsers.common import (
    BadField,
    MetricRow,
    ParsedFile,
    RunConstants,
    RunOptions,
    checked_run,
    dtype_of,
    optional_whole,
    timestamp_of,
    whole,
)

REQUIRED = ("run_id", "timestamp", "step")
COUNTS = ("tokens", "samples")
_TRUE = {"1", "true", "yes", "y"}
_FALSE = {"", "0", "false", "no", "n"}


def _checkpoint(value: str) -> bool:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BadField("checkpoint", f"expected 1 or 0: {value!r}")


def _row(cells: dict[str, str], line: int) -> tuple[MetricRow, RunConstants]:
    run_id, team = checked_run(cells["run_id"], cells.get("team") or "")
    if not cells["timestamp"].strip():
        raise BadField("timestamp", "missing")
    if not cells["step"].strip():
        raise BadField("step", "missing")
    row = MetricRow(
        run_id=run_id,
        team=team,
        line=line,
        timestamp=timestamp_of(cells["timestamp"]),
        step=whole(cells["step"], "step"),
        tokens=optional_whole(cells.get("tokens"), "tokens"),
        samples=optional_whole(cells.get("samples"), "samples"),
        checkpoint=_checkpoint(cells.get("checkpoint") or ""),
    )
    constants = RunConstants(
        model_params=optional_whole(cells.get("model_params"), "model_params", positive=True),
        flops_per_token=optional_whole(
            cells.get("flops_per_token"), "flops_per_token", positive=True
        ),
        dtype=dtype_of(cells.get("dtype")),
    )
    return row, constants


def _header(names: list[str], label: str) -> None:
    missing = [name for name in REQUIRED if name not in names]
    if missing:
        raise ImportFormatError(
            f"missing {plural('column', len(missing))} {', '.join(missing)}",
            file=label,
            row=1,
            column=missing[0],
        )
    if not any(name in names for name in COUNTS):
        raise ImportFormatError("needs a tokens or a samples column", file=label, row=1)


def parse_generic_csv(path: Path, options: RunOptions, label: str) -> ParsedFile:
    parsed = ParsedFile()
    seen: dict[tuple[str, str, datetime], int] = {}
    try:
        with CappedText(path.open(encoding="utf-8-sig", newline=""), file_label=label) as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise ImportFormatError("empty file: expected a header row", file=label)
            names = [name.strip().lower() for name in header]
            _header(names, label)
            for cells in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(names):
                    raise ImportFormatError(
                        f"expected {len(names)} cells, found {len(cells)}", file=label, row=line
                    )
                try:
                    row, constants = _row(dict(zip(names, cells, strict=True)), line)
                except BadField as exc:
                    raise ImportFormatError(
                        str(exc), file=label, row=line, column=exc.field_name
                    ) from None
                key = (row.team, row.run_id, row.timestamp)
                if key in seen:
                    raise ImportFormatError(
                        f"same run_id and timestamp as row {seen[key]}",
                        file=label, row=line, column="timestamp",
                    )  # fmt: skip
                seen[key] = line
                parsed.rows.append(row)
                parsed.add_constants((row.team, row.run_id), constants)
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"not UTF-8 text: {exc.reason}", file=label) from None
    except csv.Error as exc:
        raise ImportFormatError(f"bad CSV: {exc}", file=label) from None
    return parsed
