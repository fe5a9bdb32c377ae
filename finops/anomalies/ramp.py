"""The ramp rule of the detector (DetectorSettings.ramp): new runs ramping up are not anomalies.

A ramp (a workload growing over two to four weeks) raises a series a little more each day; a
level shift or a spike arrives at once. So before a day is judged, the ratio of each of the last
`ramp_days` normal days to its expected value (under the day's fit) is fitted with a straight
line (Theil-Sen's). When that line rises significantly (t-statistic >= `ramp_t`, 2) and already
sits above 1 at its end, the day's expected value is the fit's times the line extrapolated to
the day: the ramp's next step is expected, a jump on top of it is still an anomaly. A step
change leaves the ratios flat before it (nothing is extrapolated), and the days of an event
being tracked are out of the history, so an event does not become its own ramp.

Pure Python and Decimal, no ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from finops.anomalies.expected_value import median

ZERO = Decimal(0)
ONE = Decimal(1)


def ramp_factor(points: Sequence[tuple[int, Decimal]], t: int, *, min_t: Decimal) -> Decimal | None:
    """The line through points (position, ratio to expected) extrapolated to position t, when
    it rises with a t-statistic of at least min_t and ends above 1; None otherwise. The line is
    Theil-Sen's (the median of the pairwise slopes, then the median intercept), so two or three
    high days at the end (month-end load, a spike) do not make a ramp; its standard error is
    the least-squares one."""
    n = len(points)
    if n < 5:
        return None
    mean_x = sum((Decimal(x) for x, _ in points), ZERO) / n
    mean_y = sum((y for _, y in points), ZERO) / n
    sxx = sum(((Decimal(x) - mean_x) ** 2 for x, _ in points), ZERO)
    if sxx <= 0:
        return None
    slope = median(
        [(yj - yi) / (xj - xi) for a, (xi, yi) in enumerate(points) for xj, yj in points[a + 1 :]
         if xj != xi]
    )  # fmt: skip
    if slope <= 0:
        return None
    ols = sum(((Decimal(x) - mean_x) * (y - mean_y) for x, y in points), ZERO) / sxx
    sse = sum(((y - mean_y - ols * (Decimal(x) - mean_x)) ** 2 for x, y in points), ZERO)
    se = (sse / (n - 2) / sxx).sqrt()
    if se > 0 and slope / se < min_t:
        return None
    intercept = median([y - slope * x for x, y in points])
    last = max(x for x, _ in points)
    if intercept + slope * last <= ONE:
        return None
    return intercept + slope * t
