"""attempt_shares finds, by bisection, the attempt each one resumes and whether a later one
resumes it: the same shares as the scan of every other attempt it replaced (kept here as the
reference), on runs of random attempts with ties, open ends and attempts that never started."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from finops.waste.causes import (
    INTERRUPTED_STATES,
    AttemptShares,
    AttemptTimes,
    Settings,
    _one,
    attempt_shares,
)

_BASE = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
_SETTINGS = Settings(checkpoint_interval_minutes=Decimal(20), restart_minutes=Decimal(10))
_STATES = ("COMPLETED", "FAILED", "PREEMPTED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


def _reference(attempts: list[AttemptTimes], only: set[int] | None) -> list[AttemptShares]:
    """The scan attempt_shares did before (every other attempt, for each attempt)."""
    ordered = sorted(attempts, key=lambda a: (a.start is None, a.start or _EARLIEST, a.pk))
    result = []
    for attempt in ordered:
        if only is not None and attempt.pk not in only:
            continue
        before = [
            a for a in ordered if a.end is not None and attempt.start and a.end <= attempt.start
        ]
        latest = max(before, key=lambda a: (a.end, a.pk), default=None)
        resumes = latest is not None and latest.state in INTERRUPTED_STATES
        has_later = attempt.end is not None and any(
            a.start is not None and a.start >= attempt.end for a in ordered if a is not attempt
        )
        result.append(_one(attempt, resumes, has_later, None, _SETTINGS))
    return result


# Hours 0..6 on a coarse grid: many equal starts and ends; pks drawn from few values, so
# equal pks with equal ends (and different states) occur too.
_hours = st.one_of(st.none(), st.integers(min_value=0, max_value=6))


@st.composite
def _attempt(draw: st.DrawFn) -> AttemptTimes:
    start, length = draw(_hours), draw(st.integers(min_value=-1, max_value=3))
    begin = None if start is None else _BASE + dt.timedelta(hours=start)
    end = None if begin is None or draw(st.booleans()) else begin + dt.timedelta(hours=length)
    if begin is None and draw(st.booleans()):
        end = _BASE + dt.timedelta(hours=draw(st.integers(min_value=0, max_value=6)))
    state = draw(st.sampled_from(_STATES))
    return AttemptTimes(draw(st.integers(min_value=1, max_value=5)), state, begin, end)


@settings(max_examples=400, deadline=None)
@given(st.lists(_attempt(), max_size=12), st.one_of(st.none(), st.sets(st.integers(1, 5))))
def test_bisection_gives_the_scans_shares(
    attempts: list[AttemptTimes], only: set[int] | None
) -> None:
    found = attempt_shares(attempts, metrics=None, settings=_SETTINGS, only=only)
    assert found == _reference(attempts, only)


def test_a_resumed_attempt_is_found_among_many() -> None:
    # 2,000 attempts of one run, each preempted and resumed by the next: every one but the
    # first restarts, every one but the last is rework (the scan took seconds here).
    hour = dt.timedelta(hours=1)
    attempts = [
        AttemptTimes(i, "PREEMPTED" if i < 1999 else "COMPLETED", _BASE + i * hour,
                     _BASE + (i + 1) * hour)
        for i in range(2000)
    ]  # fmt: skip
    shares = attempt_shares(attempts, metrics=None, settings=_SETTINGS)
    assert [s.resumed for s in shares] == [True] * 1999 + [False]
    assert [bool(s.shares["restart"]) for s in shares] == [False] + [True] * 1999
