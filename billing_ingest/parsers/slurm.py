"""Slurm accounting: `sacct --parsable2` output with its header line.

One JobRecord per allocation: a job, an array task (`123_4`) or a heterogeneous component
(`123+0`). Steps (`123.batch`, `123.extern`, `123.0`) run inside their job's allocation, so their
GPUs are already in the job's line; counting them too would double the cost. Jobs that never
started (PENDING, pending array ranges `123_[5-9]`, Start=Unknown/None) hold nothing and are
skipped.

sacct prints local wall-clock time without an offset; the cluster's IANA time zone says which.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TextIO

from billing_ingest.errors import ImportFormatError
from billing_ingest.models import JobRecord

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
OPTIONAL_COLUMNS = ("WCKey", "Comment")
# Free text that may itself contain the `|` separator (sacct does not escape it). When such a
# column is the last one, surplus fields can only belong to it and are joined back.
_FREE_TEXT_COLUMNS = frozenset({"Comment", "JobName"})

DEFAULT_CHUNK_SIZE = 5000
# A hostlist like `n[0-99999999]` is a typo or an attack, not a cluster.
MAX_HOSTS = 100_000

_NO_TIME = frozenset({"", "unknown", "none"})
_NO_NODES = frozenset({"", "none assigned", "(null)", "none"})
_RUN_IN_COMMENT = re.compile(r"(?:^|[\s;,|&])run=([^\s;,|&]+)")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
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


class _FieldError(ValueError):
    """A bad value in one column; the parser adds file and line."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


# --- value parsers (pure; raise ValueError with a reason) -------------------------------------


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm compressed hostlist: `gpu-[001-004,007],cpu-01` -> gpu-001 ... cpu-01.

    Zero padding follows the range's lower bound (`[08-10]` -> 08, 09, 10). Several bracket groups
    in one name expand as their product (`a[1-2]-b[1-2]`). `None assigned` (a job that never got
    nodes) is no nodes.
    """
    text = text.strip()
    if text.lower() in _NO_NODES:
        return []
    hosts: list[str] = []
    for pattern in _split_top_level(text):
        hosts.extend(_expand_pattern(pattern))
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"hostlist expands to more than {MAX_HOSTS} hosts")
    # A host listed twice is still one host.
    return list(dict.fromkeys(hosts))


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets: `a[1,3],b` -> [`a[1,3]`, `b`]."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested '[' in hostlist {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in hostlist {text!r}")
    parts.append("".join(current))
    if any(not part.strip() for part in parts):
        raise ValueError(f"empty host name in hostlist {text!r}")
    return [part.strip() for part in parts]


def _expand_pattern(pattern: str) -> list[str]:
    # re.split with a capture group alternates literal text and bracket contents.
    pieces = re.split(r"\[([^\]]*)\]", pattern)
    literals = pieces[0::2]
    choices = [_expand_ranges(body, pattern) for body in pieces[1::2]]
    total = 1
    for options in choices:
        total *= len(options)
        if total > MAX_HOSTS:
            raise ValueError(f"hostlist {pattern!r} expands to more than {MAX_HOSTS} hosts")
    hosts = []
    for combo in itertools.product(*choices):
        name = literals[0]
        for value, literal in zip(combo, literals[1:], strict=True):
            name += value + literal
        hosts.append(name)
    return hosts


def _expand_ranges(body: str, pattern: str) -> list[str]:
    values: list[str] = []
    for item in body.split(","):
        match = _RANGE.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"bad range {item!r} in hostlist {pattern!r}")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise ValueError(f"descending range {item!r} in hostlist {pattern!r}")
        if int(high) - int(low) >= MAX_HOSTS:
            raise ValueError(f"hostlist {pattern!r} expands to more than {MAX_HOSTS} hosts")
        width = len(low)
        values.extend(str(n).zfill(width) for n in range(int(low), int(high) + 1))
    return values


def gpu_count(alloc_tres: str) -> Decimal:
    """GPUs allocated to the job over all its nodes, from AllocTRES.

    `gres/gpu=N` is the total; typed entries (`gres/gpu:h100=N`) repeat it per type, so they are
    summed only when the untyped entry is absent. `gres/gpumem` and `gres/gpuutil` are other TRES
    (memory, utilisation), not GPUs.
    """
    untyped: Decimal | None = None
    typed = Decimal(0)
    for item in alloc_tres.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"TRES entry {item!r} has no '='")
        if key == "gres/gpu":
            untyped = _gres_number(value, item)
        elif key.startswith("gres/gpu:"):
            typed += _gres_number(value, item)
    return untyped if untyped is not None else typed


def _gres_number(value: str, item: str) -> Decimal:
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        raise ValueError(f"bad GPU count in {item!r}") from None
    if not number.is_finite() or number < 0:
        raise ValueError(f"bad GPU count in {item!r}")
    return number


def normalise_state(text: str) -> str:
    """`CANCELLED by 1001` -> CANCELLED; a trailing `+` (truncated by sacct) is dropped."""
    words = text.split()
    if not words:
        raise ValueError("empty State")
    return words[0].rstrip("+").upper()


def run_id_for(*, wckey: str, comment: str, job_name: str) -> str:
    """The run a job belongs to: --wckey, else `run=<id>` in --comment, else the job name."""
    if wckey:
        return wckey
    match = _RUN_IN_COMMENT.search(comment)
    if match:
        return match.group(1)
    return job_name


def clean_wckey(text: str) -> str:
    """sacct marks a default wckey with a leading `*`; a bare `*` means none."""
    return text.strip().removeprefix("*")


def parse_time(text: str, zone: tzinfo, *, fold: int = 0) -> datetime | None:
    """A sacct time (local wall clock, or with an offset when SLURM_TIME_FORMAT adds one) as UTC.

    Unknown/None -> None. `fold` picks the second occurrence of a wall-clock time repeated when
    daylight saving time ends.
    """
    text = text.strip()
    if text.lower() in _NO_TIME:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"unparseable time {text!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone, fold=fold)
    return value.astimezone(UTC)


# --- the file parser --------------------------------------------------------------------------


def parse_sacct(
    path: Path,
    *,
    file_label: str,
    time_zone: tzinfo,
    stats: SacctStats | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Iterator[list[dict[str, Any]]]:
    """Yield chunks of dicts keyed by JobRecord field names (without batch and cluster).

    Raises ImportFormatError naming the file, the 1-based line (the header is line 1) and the
    column. `stats`, when given, is filled in as the file is read.
    """
    stats = stats if stats is not None else SacctStats()
    with path.open(encoding="utf-8-sig", errors="replace", newline=None) as handle:
        yield from _parse_lines(handle, file_label, time_zone, stats, chunk_size)


def _parse_lines(
    handle: TextIO, file_label: str, zone: tzinfo, stats: SacctStats, chunk_size: int
) -> Iterator[list[dict[str, Any]]]:
    lines = enumerate(handle, start=1)
    header_line, columns, trailing_bar = _read_header(lines, file_label)
    chunk: list[dict[str, Any]] = []
    for number, raw in lines:
        line = raw.rstrip("\n")
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


def _read_header(lines: Iterator[tuple[int, str]], file_label: str) -> tuple[str, list[str], bool]:
    for number, raw in lines:
        header_line = raw.rstrip("\n")
        if not header_line.strip():
            continue
        # `sacct --parsable` (not 2) ends every line with `|`.
        trailing_bar = header_line.endswith("|")
        names = [name.strip() for name in header_line.removesuffix("|").split("|")]
        return header_line, _canonical_columns(names, file_label, number), trailing_bar
    raise ImportFormatError("empty file: no sacct header line", file=file_label, row=1)


def _canonical_columns(names: list[str], file_label: str, number: int) -> list[str]:
    known = {name.lower(): name for name in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)}
    # Unknown columns keep their own name; they are read past, not used.
    columns = [known.get(name.lower(), name) for name in names]
    seen: set[str] = set()
    for column in columns:
        if column in seen:
            raise ImportFormatError(
                "column appears twice in the header", file=file_label, row=number, column=column
            )
        seen.add(column)
    for required in REQUIRED_COLUMNS:
        if required not in seen:
            raise ImportFormatError(
                "required column missing from the header (is this `sacct --parsable2` output "
                "with its header?)",
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


def _record(fields: dict[str, str], zone: tzinfo, stats: SacctStats) -> dict[str, Any] | None:
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
    end = _field("End", parse_time, fields["End"], zone)
    if end is not None and end < start:
        # Wall-clock times repeat when daylight saving ends: an End that reads earlier than its
        # Start is the second occurrence.
        end = _field("End", parse_time, fields["End"], zone, fold=1)
        if end is not None and end < start:
            raise _FieldError("End", f"End {fields['End']!r} is before Start {fields['Start']!r}")
    wckey = clean_wckey(fields.get("WCKey", ""))
    comment = fields.get("Comment", "").strip()
    name = fields["JobName"].strip()
    record = {
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


def _check_lengths(record: dict[str, Any]) -> None:
    for field, column in _BOUNDED.items():
        model_field = JobRecord._meta.get_field(field)
        limit = getattr(model_field, "max_length", None)
        if limit is not None and len(record[field]) > limit:
            raise _FieldError(column, f"value longer than {limit} characters")


def _field(column: str, parse: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return parse(*args, **kwargs)
    except ValueError as exc:
        raise _FieldError(column, str(exc)) from None
