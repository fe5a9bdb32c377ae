"""Slurm accounting: `sacct --parsable2` output with its header line (or, for `--noheader`
output, the column names given by the caller).

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

from billing_ingest.errors import ImportFormatError
from billing_ingest.models import JobRecord
from billing_ingest.parsers.lines import capped_binary_lines
from billing_ingest.parsers.rows import JobRow, row_text
from billing_ingest.parsers.slurm_values import (
    clean_wckey,
    expand_hostlist,
    gpu_count,
    normalise_state,
    parse_elapsed,
    parse_time,
    run_id_for,
)

REQUIRED_COLUMNS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "Account",
    "User",
    "Partition",
    "State",
    "Start",
    "End",
    "AllocTRES",
    "NodeList",
)
OPTIONAL_COLUMNS = ("WCKey", "Comment", "Elapsed")
# States in which End=Unknown means the job is still open; in any other it ended unrecorded.
OPEN_STATES = frozenset({"RUNNING", "SUSPENDED", "REQUEUED"})
_HOW_TO_GET_THE_HEADER = (
    "run `sacct --parsable2` without `--noheader`, or give the columns in the file's order "
    "(ingest_jobs --columns " + ",".join(REQUIRED_COLUMNS) + ",...)"
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
    # How records were read where the file left something out, and warnings about the
    # cluster's settings: note -> records (ImportBatch.notes). Kubernetes pods for now.
    notes: dict[str, int] = dataclasses.field(default_factory=dict)


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
) -> Iterator[list[JobRow]]:
    """Yield chunks of dicts keyed by JobRecord field names (without batch and cluster).

    `columns`, for `sacct --noheader` output, names the file's columns in order; every line is
    then data. Raises ImportFormatError naming the file, the 1-based line (a header is line 1)
    and the column. `stats`, when given, is filled in as the file is read.
    """
    stats = stats if stats is not None else SacctStats()
    with path.open("rb") as handle:
        lines = _raw_lines(handle, file_label)
        yield from _parse_lines(lines, file_label, time_zone, stats, chunk_size, columns)


def _raw_lines(handle: Any, file_label: str) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes without the line ending) of each line; a BOM before the first
    is dropped."""
    for number, raw in capped_binary_lines(handle, file_label=file_label):
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)
        yield number, raw.rstrip(b"\r\n")


def _decode(raw: bytes, file_label: str, number: int, columns: Sequence[str] | None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(raw, exc, file_label, number, columns) from None


def _not_utf8(
    raw: bytes,
    exc: UnicodeDecodeError,
    file_label: str,
    number: int,
    columns: Sequence[str] | None,
) -> ImportFormatError:
    # The field the bad byte is in: count the separators before it.
    position = raw.count(b"|", 0, exc.start)
    if columns is not None and position < len(columns):
        column = columns[position]
    else:
        column = str(position + 1)
    return ImportFormatError(
        f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x}); the file must be UTF-8",
        file=file_label,
        row=number,
        column=column,
    )


def _parse_lines(
    lines: Iterator[tuple[int, bytes]],
    file_label: str,
    zone: tzinfo,
    stats: SacctStats,
    chunk_size: int,
    given_columns: Sequence[str] | None,
) -> Iterator[list[JobRow]]:
    if given_columns is None:
        header_line, columns, trailing_bar = _read_header(lines, file_label)
    else:
        header_line, trailing_bar = None, False
        columns = _canonical_columns(list(given_columns), file_label, None)
    chunk: list[JobRow] = []
    for number, raw in lines:
        line = _decode(raw, file_label, number, columns)
        if not line.strip():
            continue
        if line == header_line:
            # Dumps concatenated with `cat` repeat the header.
            continue
        if trailing_bar:
            line = line.removesuffix("|")
        stats.data_rows += 1
        fields = _split_fields(line, columns, file_label, number)
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


def _read_header(
    lines: Iterator[tuple[int, bytes]], file_label: str
) -> tuple[str, list[str], bool]:
    for number, raw in lines:
        header_line = _decode(raw, file_label, number, None)
        if not header_line.strip():
            continue
        # `sacct --parsable` (not 2) ends every line with `|`.
        trailing_bar = header_line.endswith("|")
        names = [name.strip() for name in header_line.removesuffix("|").split("|")]
        return header_line, _canonical_columns(names, file_label, number), trailing_bar
    raise ImportFormatError("empty file: no sacct header line", file=file_label, row=1)


def _canonical_columns(names: list[str], file_label: str, number: int | None) -> list[str]:
    """The columns under their canonical names. `number` is the header's line, or None for
    columns the caller gave (--columns)."""
    known = {name.lower(): name for name in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)}
    origin = "the header" if number is not None else "--columns"
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


def _split_fields(line: str, columns: list[str], file_label: str, number: int) -> dict[str, str]:
    values = line.split("|")
    expected = len(columns)
    if len(values) > expected and columns[-1] in _FREE_TEXT_COLUMNS:
        values = [*values[: expected - 1], "|".join(values[expected - 1 :])]
    if len(values) != expected:
        column = columns[len(values)] if len(values) < expected else columns[-1]
        raise ImportFormatError(
            f"expected {expected} '|'-separated fields as in the header, found {len(values)}",
            file=file_label,
            row=number,
            column=column,
        )
    return dict(zip(columns, values, strict=True))


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
        "job_id_raw": fields["JobIDRaw"].strip(),
        "name": name,
        "account": fields["Account"].strip(),
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


def _field(column: str, parse: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return parse(*args, **kwargs)
    except ValueError as exc:
        raise _FieldError(column, str(exc)) from None
