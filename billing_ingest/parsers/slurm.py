"""Slurm accounting: `sacct --parsable2` output with its header line (or, for `--noheader`
output, the column names given by the caller). `sacct --parsable` output (a delimiter ending
every line) is read too, with or without its header, and so is a `--delimiter` other than `|`
when the caller names it.

JobIDRaw and Account may be missing from the columns: JobIDRaw is then the JobID, and a job
without an account gets its team from the other mapping rules, or has none.

`sacct --duplicates` (`-D`) prints every attempt of a requeued job under the same JobID; each
is its own record (the loader tells the attempts apart by their start).

One JobRecord per allocation: a job, an array task (`123_4`) or a heterogeneous component
(`123+0`). Steps (`123.batch`, `123.extern`, `123.0`) run inside their job's allocation, so their
GPUs are already in the job's line; counting them too would double the cost. Jobs that never
started (PENDING, pending array ranges `123_[5-9]`, Start=Unknown/None) hold nothing and are
skipped.

sacct prints local wall-clock time without an offset; the cluster's IANA time zone says which.

End=Unknown means "still open" only for a job that is still open (RUNNING, SUSPENDED,
REQUEUED). A finished job can show it too (a CANCELLED job whose end record was orphaned, as on
real clusters): stored open, it would absorb the GPU cost of every later month, so it ends at
Start + Elapsed, or at Start when Elapsed is missing. A RUNNING job whose End equals its Start
is open as well (some Slurm versions print that instead of Unknown).

The file is read as bytes, one capped line at a time (see lines.py), and each line is decoded
strictly: a byte that is not UTF-8 is an error naming its line and column, never replaced.
"""

from __future__ import annotations

import codecs
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, TypeVar

from billing_ingest.models import JobRecord
from billing_ingest.parsers.bounds import check_header_text
from billing_ingest.parsers.lines import capped_binary_lines
from billing_ingest.parsers.rows import JobRow, row_text
from billing_ingest.parsers.slurm_values import (
    clean_wckey,
    expand_hostlist,
    gpu_count,
    is_service,
    normalise_state,
    parse_elapsed,
    parse_time,
    run_id_for,
)
from finops.core.errors import ImportFormatError

REQUIRED_COLUMNS = (
    "JobID",
    "JobName",
    "User",
    "Partition",
    "State",
    "Start",
    "End",
    "AllocTRES",
    "NodeList",
)
# JobIDRaw defaults to JobID; without Account, the team comes from the other mapping rules.
OPTIONAL_COLUMNS = ("JobIDRaw", "Account", "WCKey", "Comment", "Elapsed")
DEFAULT_DELIMITER = "|"
# States in which End=Unknown means the job is still open; in any other it ended unrecorded.
OPEN_STATES = frozenset({"RUNNING", "SUSPENDED", "REQUEUED"})
_SUGGESTED_COLUMNS = (
    "JobID,JobIDRaw,JobName,Account,User,Partition,State,Start,End,AllocTRES,NodeList"
)
_HOW_TO_GET_THE_HEADER = (
    "run `sacct --parsable2` without `--noheader`, or give the columns in the file's order "
    f"(ingest_jobs --columns {_SUGGESTED_COLUMNS},...)"
)
# Free text that may itself contain the `|` separator (sacct does not escape it). When such a
# column is the last one, surplus fields can only belong to it and are joined back.
_FREE_TEXT_COLUMNS = frozenset({"Comment", "JobName"})

DEFAULT_CHUNK_SIZE = 5000
# sacct column behind each bounded JobRecord field: PostgreSQL rejects an over-long value with
# an error that names neither line nor column, so the parser checks first.
_BOUNDED = {
    "job_id": "JobID",
    "job_id_raw": "JobIDRaw",
    "name": "JobName",
    "account": "Account",
    "user": "User",
    "partition": "Partition",
    "state": "State",
    "run_id": "WCKey/Comment/JobName",
    "wckey": "WCKey",
}


@dataclass
class SacctStats:
    """What a parse saw, for the operator's summary."""

    data_rows: int = 0
    jobs: int = 0
    skipped_steps: int = 0
    skipped_not_started: int = 0
    # Finished jobs (not RUNNING/SUSPENDED/REQUEUED) with End=Unknown, ended at Start + Elapsed.
    finished_without_end: int = 0
    # Filled in by the loader (services/job_attempts.py): attempts beyond the first of a JobID
    # in this file (`sacct -D`), and open attempts that a later attempt of their job followed,
    # ended at that attempt's start (an estimate, until `-D` output gives their real end).
    requeued_attempts: int = 0
    superseded_open_attempts: int = 0

    # How records were read where the file left something out, and warnings about the
    # cluster's settings: note -> records (ImportBatch.notes). Kubernetes pods for now.
    notes: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclass
class _Layout:
    """How the file's lines are split: the delimiter, the columns, and whether every line ends
    with the delimiter (`sacct --parsable`, not `--parsable2`)."""

    delimiter: str
    file_label: str
    columns: list[str] | None = None
    headerless: bool = False  # the columns came from the caller (--columns)
    trailing: bool | None = None  # None until the header or the first data line says

    def strip(self, line: str) -> str:
        if self.trailing is None:
            # `--noheader --parsable`: the first data line says, by ending with the delimiter
            # one field past the columns.
            assert self.columns is not None
            fields = line.count(self.delimiter) + 1
            self.trailing = line.endswith(self.delimiter) and fields == len(self.columns) + 1
        if self.trailing and line.endswith(self.delimiter):
            return line[: -len(self.delimiter)]
        return line


class _FieldError(ValueError):
    """A bad value in one column; the parser adds file and line."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


# --- the file parser --------------------------------------------------------------------------


def parse_sacct(
    path: Path,
    *,
    file_label: str,
    time_zone: tzinfo,
    stats: SacctStats | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    columns: Sequence[str] | None = None,
    delimiter: str = DEFAULT_DELIMITER,
) -> Iterator[list[JobRow]]:
    """Yield chunks of dicts keyed by JobRecord field names (without batch and cluster).

    `columns`, for `sacct --noheader` output, names the file's columns in order; every line is
    then data. `delimiter` is sacct's `--delimiter` (default `|`). Raises ImportFormatError
    naming the file, the 1-based line (a header is line 1) and the column. `stats`, when given,
    is filled in as the file is read.
    """
    if not delimiter or delimiter.strip(" ") != delimiter:
        raise ValueError(f"bad sacct delimiter {delimiter!r}: not empty, no spaces around it")
    stats = stats if stats is not None else SacctStats()
    with path.open("rb") as handle:
        lines = _raw_lines(handle, file_label, delimiter)
        layout = _Layout(delimiter=delimiter, file_label=file_label)
        yield from _parse_lines(lines, layout, time_zone, stats, chunk_size, columns)


def _raw_lines(handle: Any, file_label: str, delimiter: str) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the line ending) of each line; a BOM before the first
    is dropped."""
    for number, raw in capped_binary_lines(handle, file_label=file_label):
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)
            check_header_text(raw, delimiter=delimiter, file_label=file_label)  # FINOPS_MAX_COLUMNS
        yield number, raw.rstrip(b"\r\n")


def _decode(raw: bytes, layout: _Layout, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc, layout, number) from None


def _not_utf8(
    raw: bytes, exc: UnicodeDecodeError, layout: _Layout, number: int
) -> ImportFormatError:
    # The field the bad byte is in: count the separators before it.
    position = raw.count(layout.delimiter.encode(), 0, exc.start)
    columns = layout.columns
    if columns is not None and position < len(columns):
        column = columns[position]
    else:
        column = str(position + 1)
    return ImportFormatError(
        f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x}); the file must be UTF-8",
        file=layout.file_label,
        row=number,
        column=column,
    )


def _parse_lines(
    lines: Iterator[tuple[int, bytes]],
    layout: _Layout,
    zone: tzinfo,
    stats: SacctStats,
    chunk_size: int,
    given_columns: Sequence[str] | None,
) -> Iterator[list[JobRow]]:
    file_label = layout.file_label
    header_line = None
    if given_columns is None:
        header_line = _read_header(lines, layout)
    else:
        layout.columns = _canonical_columns(list(given_columns), file_label, None)
        layout.headerless = True
    chunk: list[JobRow] = []
    for number, raw in lines:
        line = _decode(raw, layout, number)
        if not line.strip():
            continue
        if line == header_line:
            # Dumps concatenated with `cat` repeat the header.
            continue
        line = layout.strip(line)
        stats.data_rows += 1
        fields = _split_fields(line, layout, number)
        try:
            record = _record(fields, zone, stats)
        except _FieldError as exc:
            raise ImportFormatError(
                str(exc), file=file_label, row=number, column=exc.column
            ) from None
        if record is None:
            continue
        stats.jobs += 1
        chunk.append(record)
        if len(chunk) >= chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _read_header(lines: Iterator[tuple[int, bytes]], layout: _Layout) -> str:
    """The header line, as written; sets the layout's columns and trailing delimiter."""
    delimiter = layout.delimiter
    for number, raw in lines:
        header_line = _decode(raw, layout, number)
        if not header_line.strip():
            continue
        # `sacct --parsable` (not 2) ends every line with the delimiter.
        layout.trailing = header_line.endswith(delimiter)
        text = header_line[: -len(delimiter)] if layout.trailing else header_line
        names = [name.strip() for name in text.split(delimiter)]
        layout.columns = _canonical_columns(names, layout.file_label, number, layout)
        return header_line
    raise ImportFormatError("empty file: no sacct header line", file=layout.file_label, row=1)


def _canonical_columns(
    names: list[str], file_label: str, number: int | None, layout: _Layout | None = None
) -> list[str]:
    """The columns under their canonical names. `number` is the header's line, or None for
    columns the caller gave (--columns)."""
    known = {name.lower(): name for name in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)}
    origin = "the header" if number is not None else "--columns"
    if layout is not None and len(names) == 1:
        other = _other_delimiter(names[0], layout.delimiter)
        if other is not None:
            raise ImportFormatError(
                f"the header has no {layout.delimiter!r} between its columns but {other!r}: "
                f"exported with `sacct --delimiter={other}`? Give the same to ingest_jobs "
                f"(--delimiter {other!r})",
                file=file_label,
                row=number,
            )
    if number is not None and not any(name.lower() in known for name in names):
        # `sacct --noheader` output: the first line is a job, not column names.
        raise ImportFormatError(
            "the sacct header line is missing (the first line is data, not column names: "
            f"output of `sacct --noheader`?); {_HOW_TO_GET_THE_HEADER}",
            file=file_label,
            row=number,
        )
    # Unknown columns keep their own name; they are read past, not used.
    columns = [known.get(name.lower(), name) for name in names]
    seen: set[str] = set()
    for column in columns:
        if column in seen:
            raise ImportFormatError(
                f"column appears twice in {origin}", file=file_label, row=number, column=column
            )
        seen.add(column)
    for required in REQUIRED_COLUMNS:
        if required not in seen:
            raise ImportFormatError(
                f"required column missing from {origin} (is this `sacct --parsable2` output "
                f"with its header?); {_HOW_TO_GET_THE_HEADER}",
                file=file_label,
                row=number,
                column=required,
            )
    return columns


# Delimiters people pass to `sacct --delimiter`, to name the likely one in an error.
# `:` and `,` are in every line (times, AllocTRES), so a comma is the last guess.
_LIKELY_DELIMITERS = ("|", ";", "\t", "^", "#", "~", ",")


def _other_delimiter(text: str, delimiter: str) -> str | None:
    """The delimiter a line seems to use when it holds none of the expected one."""
    if delimiter in text:
        return None
    for other in _LIKELY_DELIMITERS:
        if other != delimiter and other in text:
            return other
    return None


def _split_fields(line: str, layout: _Layout, number: int) -> dict[str, str]:
    columns = layout.columns
    assert columns is not None
    delimiter = layout.delimiter
    values = line.split(delimiter)
    expected = len(columns)
    if len(values) > expected and columns[-1] in _FREE_TEXT_COLUMNS:
        values = [*values[: expected - 1], delimiter.join(values[expected - 1 :])]
    if len(values) != expected:
        column = columns[len(values)] if len(values) < expected else columns[-1]
        origin = "--columns" if layout.headerless else "the header"
        raise ImportFormatError(
            f"expected {expected} {delimiter!r}-separated fields as in {origin}, "
            f"found {len(values)}" + _field_count_hint(line, layout, len(values)),
            file=layout.file_label,
            row=number,
            column=column,
        )
    return dict(zip(columns, values, strict=True))


def _field_count_hint(line: str, layout: _Layout, found: int) -> str:
    """Which sacct flag likely made a line's field count differ from the columns'."""
    assert layout.columns is not None
    expected, delimiter = len(layout.columns), layout.delimiter
    other = _other_delimiter(line, delimiter) if found == 1 else None
    if other is not None:
        return (
            f" (no {delimiter!r} in the line but {other!r}: exported with "
            f"`sacct --delimiter={other}`? Give the same to ingest_jobs --delimiter)"
        )
    if found == expected + 1 and line.endswith(delimiter):
        return (
            f" (one more, and the line ends with {delimiter!r}: `sacct --parsable` output, "
            "which ends every line with the delimiter, mixed with lines that do not?)"
        )
    if found == expected + 1:
        return (
            " (one more: a column missing from "
            + ("--columns" if layout.headerless else "the header")
            + f", or a value holding {delimiter!r}?)"
        )
    if found == expected - 1 and layout.trailing:
        return (
            f" (one fewer: the first line ended with {delimiter!r} as `sacct --parsable` "
            "output does, this one does not: lines of `--parsable2` output mixed in?)"
        )
    if found == expected - 1:
        return (
            " (one fewer: "
            + (
                "--columns names a column the file does not have"
                if layout.headerless
                else "a field missing"
            )
            + f", or `sacct --parsable2` lines where `--parsable` ones ending with "
            f"{delimiter!r} were expected?)"
        )
    return ""


def _record(fields: dict[str, str], zone: tzinfo, stats: SacctStats) -> JobRow | None:
    job_id = fields["JobID"].strip()
    if not job_id:
        raise _FieldError("JobID", "empty JobID")
    if "." in job_id:
        stats.skipped_steps += 1
        return None
    state = _field("State", normalise_state, fields["State"])
    start = _field("Start", parse_time, fields["Start"], zone)
    # `123_[5-9]` is a pending array range: its tasks have not run yet.
    if "[" in job_id or state == "PENDING" or start is None:
        stats.skipped_not_started += 1
        return None
    end = _end(fields, state, start, zone, stats)
    wckey = clean_wckey(fields.get("WCKey", ""))
    comment = fields.get("Comment", "").strip()
    name = fields["JobName"].strip()
    record: JobRow = {
        "job_id": job_id,
        "job_id_raw": fields.get("JobIDRaw", "").strip() or job_id,
        "name": name,
        "account": fields.get("Account", "").strip(),
        "user": fields["User"].strip(),
        "partition": fields["Partition"].strip(),
        "state": state,
        "start": start,
        "end": end,
        "gpus": _field("AllocTRES", gpu_count, fields["AllocTRES"]),
        "nodes": _field("NodeList", expand_hostlist, fields["NodeList"]),
        "run_id": run_id_for(wckey=wckey, comment=comment, job_name=name),
        "wckey": wckey,
        "comment": comment,
        "service": is_service(comment),
    }
    _check_lengths(record)
    return record


def _end(
    fields: dict[str, str], state: str, start: datetime, zone: tzinfo, stats: SacctStats
) -> datetime | None:
    """The job's end, None while it is open (module docstring)."""
    end = _field("End", parse_time, fields["End"], zone)
    if end is not None and end < start:
        # Wall-clock times repeat when daylight saving ends: an End that reads earlier than its
        # Start is the second occurrence.
        end = _field("End", parse_time, fields["End"], zone, fold=1)
        if end is not None and end < start:
            raise _FieldError("End", f"End {fields['End']!r} is before Start {fields['Start']!r}")
    if state in OPEN_STATES:
        # End == Start on an open job is a placeholder, not a zero-length job.
        return None if end == start else end
    if end is None:
        stats.finished_without_end += 1
        elapsed = _field("Elapsed", parse_elapsed, fields.get("Elapsed", ""))
        end = start + elapsed if elapsed is not None else start
    return end


def _check_lengths(record: JobRow) -> None:
    for field, column in _BOUNDED.items():
        model_field = JobRecord._meta.get_field(field)
        limit = getattr(model_field, "max_length", None)
        if limit is not None and len(row_text(record, field)) > limit:
            raise _FieldError(column, f"value longer than {limit} characters")


_T = TypeVar("_T")


def _field(column: str, parse: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    try:
        return parse(*args, **kwargs)
    except ValueError as exc:
        raise _FieldError(column, str(exc)) from None
