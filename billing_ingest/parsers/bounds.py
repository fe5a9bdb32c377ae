"""Bounds on what reading one input file may cost, shared by every reader (issue 25).

The line cap (lines.py) bounds one line; these bound the rest of what a small file can make a
reader do:

- decompressed bytes (FINOPS_MAX_DECOMPRESSED_BYTES) and the compression ratio
  (FINOPS_MAX_COMPRESSION_RATIO: bytes out over the compressed bytes read so far, judged once
  more than _RATIO_FLOOR bytes came out): a 4 MB gzip of 4 GiB of newlines is a "bomb", not a
  bill, and is told from one after its first 64 MiB, within a second;
- blank lines, in a row (FINOPS_MAX_EMPTY_LINES_IN_A_ROW) and in all (FINOPS_MAX_EMPTY_LINES):
  each costs a Python iteration but yields no row, so a file of them reads for an hour;
- CSV columns (FINOPS_MAX_COLUMNS), checked on each row as the csv module yields it, before a
  parser builds anything per column (a 1 MB header of 100,000 names cost 1.8 GB);
- JSON nesting (FINOPS_MAX_JSON_DEPTH), checked before json.loads, whose recursion ends in a
  RecursionError (a 500) some thousand levels down.

Each failure is an ImportFormatError naming the file, raised within seconds, so the import
fails with the previous data kept. Every limit is a setting with a default far above any real
export.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from django.conf import settings

from finops.core.errors import ImportFormatError

DEFAULT_MAX_DECOMPRESSED_BYTES = 32 * 1024**3
# Billing CSV compresses 10-40x with gzip; 200x is text that says almost nothing.
DEFAULT_MAX_COMPRESSION_RATIO = 200
DEFAULT_MAX_EMPTY_LINES_IN_A_ROW = 1_000
DEFAULT_MAX_EMPTY_LINES = 100_000
# A legacy CUR with every resource tag as a column has a few hundred; FOCUS about 60.
DEFAULT_MAX_COLUMNS = 5_000
# A Kubernetes pod list nests about 12 levels, OpenCost and Prometheus answers 5.
DEFAULT_MAX_JSON_DEPTH = 64
# The ratio is judged only past this much output: a small file may compress any amount.
_RATIO_FLOOR = 64 * 1024 * 1024


def _setting(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def max_columns() -> int:
    return _setting("FINOPS_MAX_COLUMNS", DEFAULT_MAX_COLUMNS)


def max_json_depth() -> int:
    return _setting("FINOPS_MAX_JSON_DEPTH", DEFAULT_MAX_JSON_DEPTH)


# --------------------------------------------------------------------------- decompression


class DecompressedBudget(io.RawIOBase):
    """A decompressing binary stream that fails once it has given more bytes than
    FINOPS_MAX_DECOMPRESSED_BYTES, or (past _RATIO_FLOOR) more than FINOPS_MAX_COMPRESSION_RATIO
    times the compressed bytes read so far (`packed_read()`), else times the whole compressed
    size (`packed_bytes`)."""

    def __init__(
        self,
        inner: Any,
        *,
        packed_bytes: int,
        file_label: str,
        packed_read: Callable[[], int] | None = None,
    ) -> None:
        super().__init__()
        self._inner = inner
        self._label = file_label
        self._out = 0
        self._limit = _setting("FINOPS_MAX_DECOMPRESSED_BYTES", DEFAULT_MAX_DECOMPRESSED_BYTES)
        self._ratio = _setting("FINOPS_MAX_COMPRESSION_RATIO", DEFAULT_MAX_COMPRESSION_RATIO)
        self._packed_bytes = packed_bytes
        self._packed_read = packed_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._inner.read(len(view))
        count = len(data)
        view[:count] = data
        self._count(count)
        return count

    def read(self, size: int = -1) -> bytes:
        # pyarrow reads through read(); a negative size is "the rest", done in blocks so the
        # bound stops it early.
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(1 << 20), b""))
        data = bytes(self._inner.read(size))
        self._count(len(data))
        return data

    def _count(self, count: int) -> None:
        self._out += count
        if self._out > self._limit:
            raise ImportFormatError(
                f"decompresses to more than {self._limit:,} bytes "
                "(FINOPS_MAX_DECOMPRESSED_BYTES); not read further",
                file=self._label,
            )
        if self._out <= _RATIO_FLOOR:
            return
        packed = self._packed_read() if self._packed_read is not None else self._packed_bytes
        if self._out > self._ratio * max(packed, 1):
            raise ImportFormatError(
                f"decompresses to more than {self._ratio:,} times its size "
                "(FINOPS_MAX_COMPRESSION_RATIO): a compression bomb, not an export; "
                "not read further",
                file=self._label,
            )

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


def bounded_binary(inner: Any, *, packed_bytes: int, file_label: str) -> IO[bytes]:
    """A decompressed stream (a zip member) with the budget above, buffered for readline."""
    raw = DecompressedBudget(inner, packed_bytes=packed_bytes, file_label=file_label)
    return io.BufferedReader(raw, buffer_size=1 << 16)


def gzip_budget(path: Path, *, file_label: str) -> DecompressedBudget:
    """A gzip file's decompressed bytes with the budget above, its ratio judged on the
    compressed bytes read so far (a bomb is told from a bill after its first 64 MiB out)."""
    packed = gzip.GzipFile(path, "rb")
    raw_file = cast(IO[bytes], packed.fileobj)  # the file GzipFile opened: bytes read so far
    return DecompressedBudget(
        packed, packed_bytes=path.stat().st_size, file_label=file_label, packed_read=raw_file.tell
    )


def open_gzip(path: Path, *, file_label: str) -> IO[bytes]:
    """gzip_budget, buffered for readline."""
    return io.BufferedReader(gzip_budget(path, file_label=file_label), buffer_size=1 << 16)


# --------------------------------------------------------------------------- blank lines


class BlankLineCount:
    """Counts the blank lines a line reader meets; raises once there are too many."""

    def __init__(self, file_label: str) -> None:
        self._label = file_label
        self._in_a_row_limit = _setting(
            "FINOPS_MAX_EMPTY_LINES_IN_A_ROW", DEFAULT_MAX_EMPTY_LINES_IN_A_ROW
        )
        self._total_limit = _setting("FINOPS_MAX_EMPTY_LINES", DEFAULT_MAX_EMPTY_LINES)
        self._in_a_row = 0
        self._total = 0

    def see(self, line: str | bytes, number: int) -> None:
        if line.strip():
            self._in_a_row = 0
            return
        self._in_a_row += 1
        self._total += 1
        if self._in_a_row > self._in_a_row_limit:
            raise ImportFormatError(
                f"more than {self._in_a_row_limit:,} blank lines in a row "
                "(FINOPS_MAX_EMPTY_LINES_IN_A_ROW); not read further",
                file=self._label,
                row=number,
            )
        if self._total > self._total_limit:
            raise ImportFormatError(
                f"more than {self._total_limit:,} blank lines "
                "(FINOPS_MAX_EMPTY_LINES); not read further",
                file=self._label,
                row=number,
            )


# --------------------------------------------------------------------------- CSV columns


def too_many_columns(count: int, *, file_label: str, row: int | None) -> ImportFormatError:
    return ImportFormatError(
        f"has {count:,} columns, more than {max_columns():,} (FINOPS_MAX_COLUMNS); "
        "not read further",
        file=file_label,
        row=row,
    )


def check_columns(cells: list[str] | tuple[str, ...], *, file_label: str, row: int | None) -> None:
    if len(cells) > max_columns():
        raise too_many_columns(len(cells), file_label=file_label, row=row)


def check_header_text(line: str | bytes, *, delimiter: str, file_label: str) -> None:
    """The column count of a header line, told before it is split: delimiters + 1 (a quoted
    delimiter counts too, an over-estimate only names with commas in them can reach)."""
    mark: Any = delimiter.encode() if isinstance(line, bytes) else delimiter
    count = line.count(mark) + 1
    if count > max_columns():
        raise too_many_columns(count, file_label=file_label, row=1)


class csv_reader(Iterator[list[str]]):
    """csv.reader whose rows are checked against FINOPS_MAX_COLUMNS as they come: a row wider
    than that (the header first) fails naming the file and row before any parser builds from
    it, or pyarrow is asked for that many columns."""

    def __init__(self, lines: Iterable[str], *, file_label: str, **options: Any) -> None:
        self._reader = csv.reader(lines, **options)
        self._label = file_label
        self._limit = max_columns()

    @property
    def line_num(self) -> int:
        return self._reader.line_num

    def __iter__(self) -> csv_reader:
        return self

    def __next__(self) -> list[str]:
        cells = next(self._reader)
        if len(cells) > self._limit:
            raise too_many_columns(len(cells), file_label=self._label, row=self._reader.line_num)
        return cells


# --------------------------------------------------------------------------- JSON depth

# Unrolled ("normal* (special normal*)*"): far faster on long strings than an alternation.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth_exceeds(text: str | bytes, limit: int) -> bool:
    """Whether the JSON text nests arrays and objects more than `limit` deep. Strings are cut
    out first (brackets inside them do not count); then each pass removes the innermost empty
    pairs, so a text `limit` deep is empty after `limit` passes. Malformed text (a bracket
    without its pair) stops shrinking and is left to json.loads to report."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    for _ in range(limit):
        if not brackets:
            return False
        shorter = brackets.replace("[]", "").replace("{}", "")
        if len(shorter) == len(brackets):
            return False  # not balanced: json.loads says where
        brackets = shorter
    return bool(brackets) and brackets.replace("[]", "").replace("{}", "") != brackets


def too_deep_message(limit: int) -> str:
    return f"JSON nests deeper than {limit} levels (FINOPS_MAX_JSON_DEPTH); not read"


def json_loads(text: str | bytes, *, file_label: str, **options: Any) -> Any:
    """json.loads after the depth check: too deep is an ImportFormatError naming the file
    (json.loads itself would end in a RecursionError). JSONDecodeError is the caller's."""
    limit = max_json_depth()
    if json_depth_exceeds(text, limit):
        raise ImportFormatError(too_deep_message(limit), file=file_label)
    try:
        return json.loads(text, **options)
    except RecursionError:  # deep inside a string-free text the regexes could not cut
        raise ImportFormatError(too_deep_message(limit), file=file_label) from None
