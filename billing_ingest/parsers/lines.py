"""Line-length cap for the line-oriented readers (CSV, sacct, Prometheus text, JSON lines).

Reading "the next line" reads until a newline, however far away it is: a 500 MB line with no
newline would sit in memory whole (twice, once as bytes and once decoded) before any parser
could reject it. Every line is therefore read with a size limit, settings.FINOPS_MAX_LINE_BYTES,
and a line that reaches it fails with the file and the line number instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import IO, AnyStr

from django.conf import settings

from billing_ingest.parsers.bounds import BlankLineCount
from finops.core.errors import ImportFormatError

# A few MB: far above any real billing or sacct row (CSV fields are capped at 128 KB by the csv
# module anyway), far below what would strain a worker's memory.
DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024


def max_line_bytes() -> int:
    return int(getattr(settings, "FINOPS_MAX_LINE_BYTES", DEFAULT_MAX_LINE_BYTES))


def line_too_long(*, file_label: str, row: int, limit: int) -> ImportFormatError:
    return ImportFormatError(
        f"line is longer than {limit:,} bytes (FINOPS_MAX_LINE_BYTES); not read further",
        file=file_label,
        row=row,
    )


def _is_complete(line: AnyStr, limit: int) -> bool:
    """A line read with readline(limit + 1) that did not hit the limit."""
    if len(line) <= limit:
        return True
    # Exactly limit characters plus its newline is still within the cap.
    ending = "\n" if isinstance(line, str) else b"\n"
    return len(line) == limit + 1 and line.endswith(ending)  # type: ignore[arg-type]


def capped_binary_lines(
    handle: IO[bytes], *, file_label: str, limit: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw line with its ending) of a binary stream, each at most `limit`
    bytes before its newline; too many blank lines fail (bounds.BlankLineCount)."""
    limit = max_line_bytes() if limit is None else limit
    blanks = BlankLineCount(file_label)
    number = 0
    while True:
        raw = handle.readline(limit + 1)
        if not raw:
            return
        number += 1
        if not _is_complete(raw, limit):
            raise line_too_long(file_label=file_label, row=number, limit=limit)
        blanks.see(raw, number)
        yield number, raw


class CappedText:
    """A text stream read line by line with the cap: iterate it (csv.reader does) or call
    readline. Lines are counted in characters, at least one byte each, so the cap in bytes
    bounds the characters held too. The error names the physical line, which is the CSV row
    unless a quoted cell earlier in the file spans lines. Too many blank lines fail too
    (bounds.BlankLineCount)."""

    def __init__(self, handle: IO[str], *, file_label: str, limit: int | None = None) -> None:
        self._handle = handle
        self._file_label = file_label
        self._limit = max_line_bytes() if limit is None else limit
        self._line = 0
        self._blanks = BlankLineCount(file_label)

    def readline(self) -> str:
        text = self._handle.readline(self._limit + 1)
        if text:
            self._line += 1
            if not _is_complete(text, self._limit):
                raise line_too_long(file_label=self._file_label, row=self._line, limit=self._limit)
            self._blanks.see(text, self._line)
        return text

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        text = self.readline()
        if not text:
            raise StopIteration
        return text

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> CappedText:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
