"""What the run-metrics parsers share: the row every format is read into, the per-run constants,
the command line's defaults for formats that do not name their run, and cell converters."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation

# Training precisions and the names frameworks print for them.
DTYPES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16", "bf16-mixed": "bf16",
    "bf16-true": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16", "16-mixed": "fp16",
    "16": "fp16", "fp8": "fp8", "float8": "fp8", "tf32": "tf32", "fp32": "fp32",
    "float32": "fp32", "32": "fp32", "32-true": "fp32",
}  # fmt: skip
DEFAULT_DTYPE = "bf16"
RUN_ID_MAX = 500
TEAM_MAX = 100


class BadField(ValueError):
    """A cell that cannot be read; the parser adds file and row (ImportFormatError)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field_name = field_name


@dataclass(frozen=True, slots=True)
class MetricRow:
    """One logged step of a run, as every format maps it (DESIGN section 9)."""

    run_id: str
    team: str
    line: int
    timestamp: datetime
    step: int
    tokens: int | None
    samples: int | None
    checkpoint: bool


@dataclass(slots=True)
class RunConstants:
    """A run's constants as a file states them (None / "": not stated)."""

    model_params: int | None = None
    flops_per_token: int | None = None
    dtype: str = ""

    def update(self, other: RunConstants) -> None:
        """The last non-empty value wins."""
        self.model_params = other.model_params or self.model_params
        self.flops_per_token = other.flops_per_token or self.flops_per_token
        self.dtype = other.dtype or self.dtype


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What the command line says for formats whose files do not name the run (log lines):
    the run id and team, the constants, the sequence length (tokens per sample) and the global
    batch size (samples per step)."""

    run_id: str = ""
    team: str = ""
    model_params: int | None = None
    flops_per_token: int | None = None
    dtype: str = ""
    seq_length: int | None = None
    global_batch_size: int | None = None
    # When the attempt started, for logs that count seconds from their start (Lightning).
    started_at: datetime | None = None

    def constants(self) -> RunConstants:
        return RunConstants(self.model_params, self.flops_per_token, self.dtype)


@dataclass(slots=True)
class ParsedFile:
    """One file's rows in file order and the constants of each (team, run id) it names."""

    rows: list[MetricRow] = field(default_factory=list)
    constants: dict[tuple[str, str], RunConstants] = field(default_factory=dict)

    def add_constants(self, key: tuple[str, str], constants: RunConstants) -> None:
        self.constants.setdefault(key, RunConstants()).update(constants)


def whole(value: str, field_name: str, *, positive: bool = False) -> int:
    """A count: a whole, finite, non-negative number ("12", "12.0", "1.2e9" as loggers print)."""
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        raise BadField(field_name, f"not a number: {value!r}") from None
    if not number.is_finite():
        raise BadField(field_name, f"not a finite number: {value!r}")
    if number < 0 or (positive and number == 0):
        raise BadField(field_name, f"must be {'above' if positive else 'at least'} 0: {value!r}")
    if number != number.to_integral_value():
        raise BadField(field_name, f"not a whole number: {value!r}")
    return int(number)


def optional_whole(value: str | None, field_name: str, *, positive: bool = False) -> int | None:
    if value is None or not value.strip():
        return None
    return whole(value, field_name, positive=positive)


def dtype_of(value: str | None, field_name: str = "dtype") -> str:
    """A precision as stored ("" when not given): bf16, fp16, fp8, tf32 or fp32."""
    text = (value or "").strip().lower()
    if not text:
        return ""
    try:
        return DTYPES[text]
    except KeyError:
        known = ", ".join(sorted(set(DTYPES.values())))
        raise BadField(field_name, f"unknown dtype {value!r}; known: {known}") from None


def timestamp_of(value: str, field_name: str = "timestamp") -> datetime:
    """ISO 8601; UTC unless it has an offset (DESIGN section 9)."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise BadField(field_name, f"not an ISO 8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def checked_run(run_id: str, team: str) -> tuple[str, str]:
    run_id, team = run_id.strip(), team.strip().lower()
    if not run_id:
        raise BadField("run_id", "missing")
    if len(run_id) > RUN_ID_MAX:
        raise BadField("run_id", f"longer than {RUN_ID_MAX} characters")
    if len(team) > TEAM_MAX:
        raise BadField("team", f"longer than {TEAM_MAX} characters")
    return run_id, team
