"""Where a long run's time goes: named phases, timed where they end, kept with the run.

A month's attribution is one call that reads, splits, reduces, writes and stores; its total alone
hid for a session that one phase (the idle showback) took 60 % of it at 1,000 nodes. The run
opens a clock (phase_clock) and each stage marks the end of its phase (phase_mark) wherever it
is, without the clock threaded through every signature; with no clock open a mark does nothing,
so the stages stay plain functions for the tests and the bench.

    with phase_clock() as clock:
        inputs = load(); phase_mark("inputs")
        ...
    run.phases = clock.seconds()  # [(phase, seconds), ...]
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class PhaseClock:
    """Seconds per named phase: a mark adds the time since the previous mark (or the start) to
    its phase, so a phase marked twice (once per part, say) sums."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self._seconds: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self._seconds[name] = self._seconds.get(name, 0.0) + now - self._last
        self._last = now

    def seconds(self) -> list[tuple[str, float]]:
        """(phase, seconds to the millisecond), in the order the phases first ended: pairs,
        since a JSON object's keys lose their order in PostgreSQL's jsonb."""
        return [(name, round(value, 3)) for name, value in self._seconds.items()]


_CLOCK: ContextVar[PhaseClock | None] = ContextVar("phase_clock", default=None)


@contextmanager
def phase_clock() -> Iterator[PhaseClock]:
    """Open a clock for the marks made inside the block (this thread or task only)."""
    clock = PhaseClock()
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


def phase_mark(name: str) -> None:
    """End the phase `name` on the open clock, if any."""
    clock = _CLOCK.get()
    if clock is not None:
        clock.mark(name)
