"""The ramp rule of the detector (DetectorSettings.ramp): new runs ramping up are not anomalies.

A ramp (a workload growing over two to four weeks) raises a series a little more each day; a
level shift or a spike arrives at once. So before a day is judged, the ratio of each of the last
`ramp_days` normal days to its expected value (under the day's fit) is fitted with a straight
line (least squares). When that line rises significantly (t-statistic >= `ramp_t`, 2) and already
sits above 1 at its end, the day's expected value is the fit's times the line extrapolated to
the day: the ramp's next step is expected, a jump on top of it is still an anomaly. A step
change leaves the ratios flat before it (nothing is extrapolated), and the days of an event
being tracked are out of the history, so an event does not become its own ramp.

Pure Python and Decimal, no ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

ZERO = Decimal(0)
ONE = Decimal(1)


def ramp_factor(
    points: Sequence[tuple[int, Decimal]], t: int, *, min_t: Decimal
) -> Decimal | None:
    """The line through points (position, ratio to expected) extrapolated to position t, when
    it rises with a t-statistic of at least min_t and ends above 1; None otherwise."""
    n = len(points)
    if n < 5:
        return None
    mean_x = sum((Decimal(x) for x, _ in points), ZERO) / n
    mean_y = sum((y for _, y in points), ZERO) / n
    sxx = sum(((Decimal(x) - mean_x) ** 2 for x, _ in points), ZERO)
    if sxx <= 0:
        return None
    slope = sum(((Decimal(x) - mean_x) * (y - mean_y) for x, y in points), ZERO) / sxx
    if slope <= 0:
        return None
    sse = sum(((y - mean_y - slope * (Decimal(x) - mean_x)) ** 2 for x, y in points), ZERO)
    se = (sse / (n - 2) / sxx).sqrt()
    if se > 0 and slope / se < min_t:
        return None
    last = max(x for x, _ in points)
    if mean_y + slope * (Decimal(last) - mean_x) <= ONE:
        return None
    return mean_y + slope * (Decimal(t) - mean_x)
