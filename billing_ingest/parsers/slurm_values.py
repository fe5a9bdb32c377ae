"""sacct cell parsers for the Slurm parser (slurm.py): hostlists, GPU counts from AllocTRES,
states, run ids and the service mark, Elapsed and local times. Pure; each raises ValueError
with a reason, and the file parser adds file, line and column.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal, InvalidOperation

# A hostlist like `n[0-99999999]` is a typo or an attack, not a cluster.
MAX_HOSTS = 100_000

_NO_TIME = frozenset({"", "unknown", "none"})
_NO_NODES = frozenset({"", "none assigned", "(null)", "none"})
_RUN_IN_COMMENT = re.compile(r"(?:^|[\s;,|&])run=([^\s;,|&]+)")
# `service=true` (or `finops.service=true`) in --comment: a long-running server or runner, not
# a training run (no checkpoints: no checkpoint advice, no rework, restart or abandoned waste).
_SERVICE_IN_COMMENT = re.compile(
    r"(?:^|[\s;,|&])(?:finops\.)?service=true(?=$|[\s;,|&])", re.IGNORECASE
)
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
# sacct's Elapsed: [days-][hours:]minutes:seconds.
_ELAPSED = re.compile(r"(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+)")


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


def is_service(comment: str) -> bool:
    """Whether --comment marks the job a service: `service=true` or `finops.service=true`."""
    return _SERVICE_IN_COMMENT.search(comment) is not None


def clean_wckey(text: str) -> str:
    """sacct marks a default wckey with a leading `*`; a bare `*` means none."""
    return text.strip().removeprefix("*")


def parse_elapsed(text: str) -> timedelta | None:
    """sacct's Elapsed (`1-02:03:04`, `02:03:04`, `03:04`) as a duration; empty/Unknown -> None."""
    text = text.strip()
    if text.lower() in _NO_TIME or text.upper() == "INVALID":
        return None
    match = _ELAPSED.fullmatch(text)
    if match is None:
        raise ValueError(f"unparseable elapsed time {text!r} (expected [D-]HH:MM:SS)")
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


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
