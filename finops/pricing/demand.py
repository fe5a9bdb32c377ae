"""Hourly curves for the recommendations (issue 27): GPUs in use, nodes billed. Pure (numpy).

An interval [a, b) (epoch seconds) holding `count` GPUs (or nodes) adds count x its overlap
with each hour / 3600 to that hour: a 90-minute job on 8 GPUs from 10:30 adds 4 to the 10:00
hour and 8 to the 11:00 hour. Full hours go through a difference array, so a long job costs as
little as a short one. Floats: these are demand levels, never money.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

HOUR = 3600.0
Curve = npt.NDArray[np.float64]


def hourly(intervals: Iterable[tuple[float, float, float]], *, start: float, hours: int) -> Curve:
    """Per hour from `start`, the sum over intervals (a, b, count) of count x overlap / 1 h."""
    curve = np.zeros(hours + 1)
    full = np.zeros(hours + 2)
    end = start + hours * HOUR
    for a, b, count in intervals:
        a, b = max(a, start), min(b, end)
        if b <= a or not count:
            continue
        ha, hb = (a - start) / HOUR, (b - start) / HOUR
        first, last = math.floor(ha), math.floor(hb)
        if first == last:
            curve[first] += count * (hb - ha)
            continue
        curve[first] += count * (first + 1 - ha)
        curve[last] += count * (hb - last)
        full[first + 1] += count
        full[last] -= count
    return (curve + np.cumsum(full)[: hours + 1])[:hours]


def percentile_level(curve: Curve, pct: int) -> float:
    """Nearest-rank percentile of the hourly values (0 for none); pct held to 1..100."""
    if not len(curve):
        return 0.0
    ordered = np.sort(curve)
    rank = min(len(ordered), max(1, math.ceil(pct / 100 * len(ordered))))
    return float(ordered[rank - 1])
