"""Megatron-LM (and NeMo's Megatron) training logs, e.g.

   [2025-06-03 10:05:00] iteration       50/     500 | consumed samples:        12800 |
      elapsed time per iteration (ms): 12000.0 | throughput per GPU (TFLOP/s/GPU): 382.3 |
      learning rate: 3.000000E-04 | global batch size:   256 | lm loss: 7.123456E+00 | ...
                                                                            (one line)
  successfully saved checkpoint from iteration     250 to /ckpt [ t 1/1, p 1/1 ]

samples = consumed samples; tokens = the `consumed tokens:` cell where the log has one
(Megatron-DeepSpeed), else consumed samples x sequence length (--seq-length, else the
`seq_length ....... 4096` line of the arguments Megatron prints at start). The precision comes
from the arguments too (`bf16 ....... True`, `fp16 ....... True`) unless --dtype is given. An
iteration line without its leading time (Megatron before 2023) cannot be placed in time and
fails the import. "successfully saved checkpoint from iteration N" marks iteration N's row.
"""

from __future__ import annotations

import re
from pathlib import Path

from finops.core.errors import ImportFormatError
from finops.run_metrics.parsers.common import (
    BadField,
    ParsedFile,
    RunConstants,
    RunOptions,
    checked_run,
)
from finops.run_metrics.parsers.log_lines import (
    TIME,
    log_lines,
    logged_at,
    mark_checkpoint,
    step_row,
)

_ITERATION = re.compile(r"\biteration\s+(\d+)/\s*\d+\s*\|")
_TIMED = re.compile(r"^\s*\[" + TIME + r"\]\s*iteration\s")
_SAMPLES = re.compile(r"\|\s*consumed samples:\s*(\d+)\s*\|")
_TOKENS = re.compile(r"\|\s*consumed tokens:\s*(\d+)\s*\|")
_ARGUMENT = re.compile(r"^\s*(seq_length|bf16|fp16)\s\.+\s(\S+)\s*$")
_SAVED = re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(\d+)")


class _Arguments:
    def __init__(self, options: RunOptions) -> None:
        self.seq = options.seq_length
        self.dtype = options.dtype
        self._given_dtype = bool(options.dtype)

    def read(self, text: str) -> bool:
        found = _ARGUMENT.match(text)
        if not found:
            return False
        name, value = found[1], found[2]
        if name == "seq_length" and value.isdigit():
            self.seq = self.seq or int(value)
        elif value == "True" and not self._given_dtype:
            self.dtype = name
        return True


def _row_tokens(text: str, samples: int, seq: int | None) -> int | None:
    given = _TOKENS.search(text)
    if given:
        return int(given[1])
    return samples * seq if seq else None


def parse_megatron(path: Path, options: RunOptions, label: str) -> ParsedFile:
    parsed = ParsedFile()
    arguments = _Arguments(options)
    for number, text in log_lines(path, label):
        if arguments.read(text):
            continue
        saved = _SAVED.search(text)
        if saved:
            mark_checkpoint(parsed.rows, int(saved[1]))
            continue
        iteration = _ITERATION.search(text)
        if not iteration:
            continue
        timed, samples = _TIMED.match(text), _SAMPLES.search(text)
        if not timed:
            raise ImportFormatError(
                "iteration line without its time ([YYYY-MM-DD HH:MM:SS])",
                file=label, row=number, column="timestamp",
            )  # fmt: skip
        if not samples:
            raise ImportFormatError(
                "iteration line without consumed samples", file=label, row=number,
                column="consumed samples",
            )  # fmt: skip
        consumed = int(samples[1])
        tokens = _row_tokens(text, consumed, arguments.seq)
        if tokens is None:
            raise ImportFormatError(
                "no sequence length (give --seq-length; the log's arguments have no seq_length)",
                file=label, row=number, column="consumed samples",
            )  # fmt: skip
        try:
            row = step_row(
                options, line=number, at=logged_at(timed[1], timed[2]),
                step=int(iteration[1]), samples=consumed, tokens=tokens,
            )  # fmt: skip
        except (BadField, ValueError) as exc:
            raise ImportFormatError(str(exc), file=label, row=number) from None
        parsed.rows.append(row)
    if parsed.rows:
        constants = RunConstants(options.model_params, options.flops_per_token, arguments.dtype)
        run_id, team = checked_run(options.run_id, options.team)
        parsed.add_constants((team, run_id), constants)
    return parsed
