"""torchtitan training logs (rank 0's stdout), e.g.

  [rank0]:[titan] 2025-06-03 10:05:00,123 - root - INFO - Trainer is initialized with local
      batch size 2, global batch size 256, gradient accumulation steps 1, sequence length 4096,
      total steps 500 (warmup 50)                                           (one line)
  [rank0]:[titan] 2025-06-03 10:05:00,123 - root - INFO - step: 50  loss:  7.1234  grad_norm:
      1.2345  memory: 62.10GiB(78.50%)  tps: 3,210  tflops: 134.82  mfu: 13.63%   (one line)
  [rank0]:[titan] 2025-06-03 10:15:02,456 - root - INFO - Saving the checkpoint (or staging if
      async is enabled).

torchtitan prints no cumulative counts: samples = step x global batch size and tokens = samples
x sequence length, both from the "Trainer is initialized with" line (newest wins: a restart
prints it again) or --global-batch-size / --seq-length. A "Saving the checkpoint" line marks the
step logged last before it. Its `tps` and `mfu` are torchtitan's own per-GPU estimates, not read:
MFU here is measured against the allocated GPU-seconds of the run.
"""

from __future__ import annotations

import re
from pathlib import Path

from finops.core.errors import ImportFormatError
from finops.run_metrics.parsers.common import BadField, ParsedFile, RunOptions, checked_run
from finops.run_metrics.parsers.log_lines import (
    TIME,
    log_lines,
    logged_at,
    mark_checkpoint,
    step_row,
)

_STEP = re.compile(TIME + r".* - [A-Z]+ - step:\s*(\d+)\s+loss:")
_INIT = re.compile(r"global batch size (\d+),.*sequence length (\d+)")
_CHECKPOINT = re.compile(r" - [A-Z]+ - Saving the checkpoint")


class _Shape:
    def __init__(self, options: RunOptions) -> None:
        self.batch = options.global_batch_size
        self.seq = options.seq_length

    def read(self, text: str) -> None:
        found = _INIT.search(text)
        if found:
            self.batch, self.seq = int(found[1]), int(found[2])


def parse_torchtitan(path: Path, options: RunOptions, label: str) -> ParsedFile:
    parsed = ParsedFile()
    shape = _Shape(options)
    for number, text in log_lines(path, label):
        shape.read(text)
        if _CHECKPOINT.search(text):
            mark_checkpoint(parsed.rows, None)
            continue
        found = _STEP.search(text)
        if not found:
            continue
        if shape.batch is None or shape.seq is None:
            raise ImportFormatError(
                "no global batch size and sequence length before the first step (no "
                "'Trainer is initialized with' line): give --global-batch-size and --seq-length",
                file=label, row=number, column="step",
            )  # fmt: skip
        step = int(found[3])
        try:
            row = step_row(
                options, line=number, at=logged_at(found[1], found[2]), step=step,
                samples=step * shape.batch, tokens=step * shape.batch * shape.seq,
            )  # fmt: skip
        except (BadField, ValueError) as exc:
            raise ImportFormatError(str(exc), file=label, row=number) from None
        parsed.rows.append(row)
    if parsed.rows:
        run_id, team = checked_run(options.run_id, options.team)
        parsed.add_constants((team, run_id), options.constants())
    return parsed
