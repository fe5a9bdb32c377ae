"""Waste of a run by cause (DESIGN section 9), as exact fractions of each attempt's cost.

Pure: attempts in, parts out; the reads are in attempts.py and selectors.py.

Every attempt's time [start, end) is cut into disjoint windows, each a share of the attempt's
cost (the cost is spread evenly over the attempt's time: its GPUs are fixed for its life):

- `restart`: an attempt that resumes an interrupted one, from its start to its first metrics
  row (without metrics in its window: the configured restart minutes, estimated);
- `rework`: an interrupted attempt that a later attempt resumed, from its last checkpoint (or,
  without a checkpoint in it, from the end of its restart window or its start) to its end
  (without metrics in its window: half the configured checkpoint interval, estimated);
- `abandoned`: the whole cost of an interrupted attempt that no later attempt resumed;
- `cancelled`: the whole cost of a CANCELLED attempt of a training run (apart: a cancellation
  may be a decision, so it is not in `total`);
- `idle_in_allocation`: where the job's GPU utilisation u is measured and the job was charged
  what it requested, the rest of the attempt's cost x (1 - u).

A service (a long-running server or runner, not a training run: JobRecord.service) writes no
checkpoints, so it has no restart, rework or abandoned part (an interrupted service loses no
work to redo), and resumes nothing; its idle in allocation (once it has ended) is as above. A
CANCELLED service ended as a COMPLETED one does (scancel, a scale-down: the normal way a
server or runner stops): no `cancelled` part, its idle in allocation counted.

The windows do not overlap and each share is at most 1, so the parts of an attempt never add to
more than its cost; parts are rounded down to the money quantum, so their sum never exceeds
the run's cost either.
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction

from finops.core.money import MONEY_QUANTUM, exact_context

# An attempt that ended in one of these was interrupted: the work since its last checkpoint is
# lost. TIMEOUT is not one: long runs are chained jobs that end at the wall-clock limit on
# purpose, after a checkpoint.
INTERRUPTED_STATES = frozenset({"PREEMPTED", "NODE_FAIL", "FAILED", "OUT_OF_MEMORY", "REQUEUED"})
# Of those, the capacity losses (the scheduler or the provider took the GPUs back, or the node
# died): what a spot decision weighs. FAILED and OUT_OF_MEMORY are the job's own; REQUEUED is
# left out (a requeue names no cause: the attempt's own end state says it).
CAPACITY_STATES = frozenset({"PREEMPTED", "NODE_FAIL"})
CANCELLED_STATE = "CANCELLED"
CAUSES = ("rework", "restart", "abandoned", "cancelled", "idle_in_allocation")
# The causes `total` adds up (cancelled is apart).
TOTAL_CAUSES = ("rework", "restart", "abandoned", "idle_in_allocation")
_CTX = exact_context(rounding=ROUND_DOWN)
ZERO = Decimal(0)
_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
# Fractions are immutable: one 0 and one 1 shared by every attempt (a month has tens of
# thousands; building them was a good part of the shares' time).
_NONE = Fraction(0)
_WHOLE = Fraction(1)


@dataclass(frozen=True, slots=True)
class AttemptTimes:
    """One attempt of a run: a job record (a requeued Slurm job's attempt, a resubmission, a
    pod) as the waste needs it."""

    pk: int
    state: str
    start: dt.datetime | None
    end: dt.datetime | None
    # Measured GPU utilisation 0..1 where the job was charged what it requested; else None.
    utilisation: Fraction | None = None
    # A long-running server or runner (JobRecord.service): no restart, rework or abandoned.
    service: bool = False


@dataclass(frozen=True, slots=True)
class Metrics:
    """The run's metrics points (time order): timestamps, and those that saved a checkpoint."""

    timestamps: Sequence[dt.datetime]
    checkpoints: Sequence[dt.datetime]


@dataclass(frozen=True, slots=True)
class Settings:
    """The pricing assumptions the estimates use."""

    checkpoint_interval_minutes: Decimal
    restart_minutes: Decimal


@dataclass(frozen=True, slots=True)
class AttemptShares:
    """Each cause's share (0..1) of one attempt's cost, and which shares are estimates."""

    pk: int
    shares: dict[str, Fraction]
    estimated: frozenset[str] = frozenset()
    interrupted: bool = False
    resumed: bool = False
    # The checkpoint times inside the attempt (for the run page's timeline).
    checkpoints: tuple[dt.datetime, ...] = ()


@dataclass(slots=True)
class WasteParts:
    """Money per cause (rounded down to the money quantum) and whether any part is estimated."""

    rework: Decimal = ZERO
    restart: Decimal = ZERO
    abandoned: Decimal = ZERO
    cancelled: Decimal = ZERO
    idle_in_allocation: Decimal = ZERO
    estimated_causes: set[str] = field(default_factory=set)

    @property
    def total(self) -> Decimal:
        """rework + restart + abandoned + idle_in_allocation (cancelled is apart)."""
        return self.rework + self.restart + self.abandoned + self.idle_in_allocation

    @property
    def estimated(self) -> bool:
        return bool(self.estimated_causes)

    def add(self, other: WasteParts) -> None:
        # Each cause of CAUSES spelled out (a loop of getattr and setattr cost seconds a month).
        self.rework += other.rework
        self.restart += other.restart
        self.abandoned += other.abandoned
        self.cancelled += other.cancelled
        self.idle_in_allocation += other.idle_in_allocation
        self.estimated_causes |= other.estimated_causes


def _seconds(delta: dt.timedelta) -> Fraction:
    micros = (delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds
    return Fraction(micros, 10**6)


def _clamp(value: Fraction) -> Fraction:
    return min(_WHOLE, max(_NONE, value))


def attempt_shares(
    attempts: Iterable[AttemptTimes],
    *,
    metrics: Metrics | None,
    settings: Settings,
    only: set[int] | None = None,
) -> list[AttemptShares]:
    """The share of each cause in each attempt's cost. `attempts` are the run's, any order;
    with `only`, the shares of those attempts (by pk), still judged against all of them.

    Attempts of a run may run side by side (a job array's tasks): an interrupted attempt is
    resumed when an attempt of the run starts at or after its end, and an attempt resumes the
    attempt that ended last at or before its start when that one was interrupted."""
    ordered = sorted(attempts, key=lambda a: (a.start is None, a.start or _EARLIEST, a.pk))
    # Searched by bisection, not scanned for each attempt (a job array of thousands of tasks
    # made that quadratic): the ended attempts by (end, pk), ties by their order above (the
    # first of equals is the one max() picked), and the start times.
    ended = sorted((a.end, a.pk, -i) for i, a in enumerate(ordered) if a.end is not None)
    ends = [end for end, _, _ in ended]
    starts = sorted(a.start for a in ordered if a.start is not None)
    result: list[AttemptShares] = []
    for attempt in ordered:
        if only is not None and attempt.pk not in only:
            continue
        # The attempt that ended last at or before this one's start (by end, then pk).
        found = bisect_right(ends, attempt.start) if attempt.start is not None else 0
        latest = ordered[-ended[found - 1][2]] if found else None
        resumes = latest is not None and not latest.service and latest.state in INTERRUPTED_STATES
        has_later = False
        if attempt.end is not None:
            # Attempts, other than this one, starting at or after its end.
            later = len(starts) - bisect_left(starts, attempt.end)
            itself = attempt.start is not None and attempt.start >= attempt.end
            has_later = later - itself > 0
        result.append(_one(attempt, resumes, has_later, metrics, settings))
    return result


def _one(
    attempt: AttemptTimes,
    resumes: bool,
    has_later: bool,
    metrics: Metrics | None,
    settings: Settings,
) -> AttemptShares:
    interrupted = attempt.state in INTERRUPTED_STATES
    shares = dict.fromkeys(CAUSES, _NONE)
    ran = attempt.start is not None and attempt.end is not None and attempt.end > attempt.start
    if attempt.service:
        # No checkpoints, nothing to redo: only the GPUs it held idle, once it has ended (as a
        # training attempt's: nothing is counted while it runs). A cancelled service ended as a
        # completed one does: scancel, a scale-down are how a server or runner stops, not a
        # decision to throw its work away.
        if ran and attempt.utilisation is not None:
            shares["idle_in_allocation"] = 1 - _clamp(attempt.utilisation)
        return AttemptShares(attempt.pk, shares, interrupted=interrupted)
    if attempt.state == CANCELLED_STATE:
        shares["cancelled"] = _WHOLE
        return AttemptShares(attempt.pk, shares)
    if interrupted and not has_later:
        shares["abandoned"] = _WHOLE
        return AttemptShares(attempt.pk, shares, interrupted=True)
    start, end = attempt.start, attempt.end
    if start is None or end is None or end <= start:
        # Running, or never ran: nothing is lost yet (and nothing can be cut in time).
        return AttemptShares(attempt.pk, shares, interrupted=interrupted, resumed=has_later)
    duration = _seconds(end - start)
    inside = [t for t in (metrics.timestamps if metrics else ()) if start <= t < end]
    checkpoints = tuple(t for t in (metrics.checkpoints if metrics else ()) if start <= t < end)
    estimated: set[str] = set()
    restart_end = start
    if resumes:
        if inside:
            restart_end = inside[0]
            shares["restart"] = _clamp(_seconds(restart_end - start) / duration)
        else:
            share = _clamp(Fraction(settings.restart_minutes) * 60 / duration)
            shares["restart"] = share
            estimated.add("restart")
    if interrupted:  # and resumed (has_later)
        if inside:
            lost_from = max(checkpoints[-1], restart_end) if checkpoints else restart_end
            shares["rework"] = _clamp(_seconds(end - lost_from) / duration)
        else:
            half = Fraction(settings.checkpoint_interval_minutes) * 30 / duration
            shares["rework"] = min(_clamp(half), 1 - shares["restart"])
            estimated.add("rework")
    if attempt.utilisation is not None:
        rest = 1 - shares["restart"] - shares["rework"]
        shares["idle_in_allocation"] = rest * (1 - _clamp(attempt.utilisation))
    return AttemptShares(
        attempt.pk,
        shares,
        estimated=frozenset(estimated),
        interrupted=interrupted,
        resumed=interrupted and has_later,
        checkpoints=checkpoints,
    )


def money_share(cost: Decimal, share: Fraction) -> Decimal:
    """cost x share, rounded down to the money quantum (never more than the exact figure)."""
    if not share or not cost:
        return ZERO
    exact = _CTX.divide(cost * share.numerator, Decimal(share.denominator))
    return exact.quantize(MONEY_QUANTUM, rounding=ROUND_DOWN)


def parts_of(shares: AttemptShares, cost: Decimal) -> WasteParts:
    """The money of each cause for one attempt whose (ledger) cost is `cost`."""
    parts = WasteParts()
    if cost <= 0:
        return parts
    for cause in CAUSES:
        setattr(parts, cause, money_share(cost, shares.shares[cause]))
    parts.estimated_causes = {c for c in shares.estimated if getattr(parts, c)}
    return parts
