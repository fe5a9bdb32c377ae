"""The sparse series' rule of the detector (DetectorSettings.sparse_rule), as a part of its pass
over a series (detector.py's _Run): a small team with many zero days is judged against its own
largest days, not against a seasonal fit that would see every active day as a spike."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

from finops.anomalies.detector_types import LEVEL_SHIFT, SPIKE, Accepted, DetectorSettings, Event
from finops.anomalies.expected_value import ZERO, median


class SparseRule:
    """The rule's steps; the pass (detector.py's _Run) holds the state they read and write."""

    days: Sequence[dt.date]
    values: Sequence[Decimal | None]
    weights: Sequence[Decimal]
    settings: DetectorSettings
    index: dict[dt.date, int]
    accepted_at: dict[int, Accepted]
    start: int | None
    excluded: set[int]
    expected: dict[int, Decimal]
    sigma: dict[int, Decimal]
    events: list[Event]

    def _history_start(self, t: int) -> int:
        raise NotImplementedError

    def _sparse(self, history: list[Decimal]) -> bool:
        zeros = sum(1 for v in history if v <= 0)
        return len(history) >= self.settings.min_history and (
            zeros >= self.settings.sparse_zero_share * len(history)
        )

    def _sparse_step(self, t: int, value: Decimal, history: list[Decimal]) -> None:
        """The sparse series' rule (DetectorSettings.sparse_rule), judged against every normal
        day since the history starts (a sparse series has few active days in one window): a
        spike is a day of at least sparse_factor x the largest of them and sparse_typical_factor
        x their median active day (5 active days known at least); a burst, sparse_burst_days
        days in a row each costing at least the median active day and summing to sparse_factor
        x the largest sum of as many days (a level shift, extended while its days keep costing
        that much; spikes inside it are part of it)."""
        s = self.settings
        b = s.sparse_burst_days
        known = {
            j: self.values[j] or ZERO
            for j in range(self._history_start(t), t)
            if j not in self.excluded and self.values[j] is not None
        }
        nonzero = [v for v in known.values() if v > 0]
        if not nonzero:
            return
        typical, largest = median(nonzero), max(nonzero)
        self.expected[t] = sum(history, ZERO) / len(history)
        self.sigma[t] = max(ZERO, s.sparse_factor * largest - self.expected[t]) / s.threshold
        if t in self.accepted_at or t - (self.start or 0) < s.min_history:
            return
        burst = self.events[-1] if self.events and self.events[-1].kind == LEVEL_SHIFT else None
        if burst is not None and burst.last == self.days[t - 1] and value >= typical:
            self.excluded.add(t)
            self.events.pop()
            self._sparse_event(LEVEL_SHIFT, self.index[burst.first], t, typical)
            return
        run = [self.values[j] or ZERO for j in range(t - b + 1, t + 1) if j >= 0]
        before = [v for j, v in known.items() if j <= t - b]  # not the run's own days
        sums = [sum(before[i : i + b], ZERO) for i in range(max(1, len(before) - b + 1))]
        total = sum(run, ZERO)
        if (
            len(run) == b
            and min(run) >= typical
            and total >= s.sparse_factor * max(sums)
            and total - b * typical >= s.min_impact
        ):
            first = self.days[t - b + 1]
            while self.events and self.events[-1].kind == SPIKE and self.events[-1].first >= first:
                self.events.pop()  # a spike of the burst's first days: the burst's start
            self.excluded.update(range(t - b + 1, t + 1))
            self._sparse_event(LEVEL_SHIFT, t - b + 1, t, typical)
            return
        if (
            len(nonzero) >= 5
            and value >= s.sparse_factor * largest
            and value >= s.sparse_typical_factor * typical
            and value - typical >= s.min_impact
        ):
            self.excluded.add(t)
            self._sparse_event(SPIKE, t, t, typical)

    def _sparse_event(self, kind: str, first: int, last: int, typical: Decimal) -> None:
        actual = expected = ZERO
        for i in range(first, last + 1):
            value = self.values[i]
            if value is not None:
                actual += value * self.weights[i]
                expected += typical * self.weights[i]
        self.events.append(
            Event(
                kind=kind,
                first=self.days[first],
                last=self.days[last],
                actual=actual,
                expected=expected,
                reported_on=self.days[last],
                ongoing=False,
                peak_z=self.settings.threshold,
            )
        )
