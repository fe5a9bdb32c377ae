"""Hard labelled daily cost series for bench/anomalies.py: the shapes real teams have, made here.

Each series is 91 days from the 20th of a month (the first month end and start fall in the
14-day warm-up), a base of 500-20,000 a day, weekly seasonality (weekends at 50-90 %) on 60 %,
and one hardness, the series' kind:

- month-end: the last 2-3 days of each month at 1.5-3x and the 1st at 1.2-2x (closing jobs,
  reports), every month, plus noise of 3-15 %;
- holidays: 2-4 blocks of 1-3 days at 10-50 %, each followed by a catch-up day carrying up to
  the work the block deferred (at most the deficit);
- price-cut: one or two permanent cuts of the level (to 50-80 % of it);
- ramp: new runs ramping up, the level rising linearly to 1.5-2.5x over 14-28 days, then flat;
- heavy-tail: multiplicative Student-t noise (3 degrees of freedom, scale 3-8 %), so a 4-6
  sigma day (by the MAD) comes every few weeks;
- bill-lag: 3-6 days booked late, 0-30 % on the day and the rest the next day;
- sparse: a small team with cost on 10-35 % of days (log-normal sizes around its base, 0.5 sd),
  zero on the others.

Labelled events (the same rules as bench/anomalies.py: 0-2 per series, spikes of one day or level
shifts of 10-30 days or to the end, adding max(30 %, 6 noise sd) x 1-3 of the day's level, never
on a day the hardness touches): on sparse series, spikes of 5-10x the median active day or
bursts (a level shift: 7-14 days in a row each active at 1.5-3x the median active day, when the
team is usually active one day in four at most).

Not anomalies (unlabelled): the month-end load, holidays and their catch-up, price cuts, ramps,
heavy-tailed noise, late bills, the sparse series' ordinary active days.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from dataclasses import dataclass, field

DAYS = 91
WARM_UP = 14
KINDS = ("month-end", "holidays", "price-cut", "ramp", "heavy-tail", "bill-lag", "sparse")


@dataclass
class Label:
    kind: str
    start: int
    end: int  # inclusive


@dataclass
class Series:
    start: dt.date
    values: list[float]
    labels: list[Label] = field(default_factory=list)
    traits: set[str] = field(default_factory=set)
    kind: str = ""


def _day(start: dt.date, i: int) -> dt.date:
    return start + dt.timedelta(days=i)


def _month_end_days(start: dt.date, n: int) -> set[int]:
    return {i for i in range(DAYS) if (_day(start, i) + dt.timedelta(days=n)).day <= n}


def _student_t(rng: random.Random, dof: int) -> float:
    normal = rng.gauss(0, 1)
    chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(dof))
    return normal / math.sqrt(chi2 / dof)


def _events(
    rng: random.Random, level: list[float], noise: float, taken: set[int]
) -> tuple[list[float], list[Label]]:
    """Up to two spikes or level shifts away from `taken` and each other (bench/anomalies.py's
    rule): the extra cost per day and the labels."""
    extra = [0.0] * DAYS
    labels: list[Label] = []
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        magnitude = max(0.30, 6 * noise) * rng.uniform(1.0, 3.0)
        for _attempt in range(30):
            first = rng.randint(WARM_UP + 6, DAYS - 5)
            if rng.random() < 0.5:
                kind, end = "spike", first
            else:
                kind, end = "level_shift", min(DAYS - 1, first + rng.choice([10, 20, 30, DAYS]))
            busy = {d for label in labels for d in range(label.start - 8, label.end + 9)}
            if first in taken or first in busy or set(range(first, end + 1)) & busy:
                continue
            for i in range(first, end + 1):
                extra[i] = level[i] * magnitude
            labels.append(Label(kind, first, end))
            break
    return extra, labels


def _sparse(rng: random.Random, start: dt.date) -> Series:
    base = rng.uniform(200, 5000)
    active = rng.uniform(0.10, 0.35)
    values = [
        round(base * math.exp(rng.gauss(0, 0.5)), 2) if rng.random() < active else 0.0
        for _ in range(DAYS)
    ]
    labels: list[Label] = []
    for _ in range(rng.choice([0, 1, 1, 2])):
        first = rng.randint(WARM_UP + 6, DAYS - 5)
        if any(abs(first - label.start) < 15 for label in labels):
            continue
        if rng.random() < 0.6 or active > 0.25:
            values[first] = round(base * rng.uniform(5, 10), 2)
            labels.append(Label("spike", first, first))
        else:
            end = min(DAYS - 1, first + rng.randint(7, 14))
            for i in range(first, end + 1):
                values[i] = round(base * rng.uniform(1.5, 3.0), 2)
            labels.append(Label("level_shift", first, end))
    labels.sort(key=lambda label: label.start)
    return Series(start, values, labels, {"sparse"}, "sparse")


def _level(rng: random.Random, kind: str, base: float) -> tuple[list[float], set[int]]:
    """The level per day (price cuts and ramps change it) and the days it changes on."""
    level = [base] * DAYS
    touched: set[int] = set()
    if kind == "price-cut":
        for _ in range(rng.choice([1, 2])):
            cut = rng.randint(WARM_UP + 6, DAYS - 10)
            factor = rng.uniform(0.5, 0.8)
            level[cut:] = [v * factor for v in level[cut:]]
            touched |= set(range(cut, cut + 3))
    elif kind == "ramp":
        first = rng.randint(WARM_UP, 55)
        length = rng.randint(14, 28)
        top = rng.uniform(1.5, 2.5)
        for i in range(first, DAYS):
            level[i] = base * (1 + (top - 1) * min(1.0, (i - first + 1) / length))
        touched |= set(range(first, first + length + 1))
    return level, touched


def _holidays(rng: random.Random) -> dict[int, float]:
    """Holiday days (factor) and their catch-up days (factor > 1, at most the deficit)."""
    out: dict[int, float] = {}
    for _ in range(rng.randint(2, 4)):
        first = rng.randint(WARM_UP, DAYS - 6)
        length = rng.randint(1, 3)
        if any(d in out for d in range(first - 2, first + length + 2)):
            continue
        deficit = 0.0
        for d in range(first, first + length):
            out[d] = rng.uniform(0.1, 0.5)
            deficit += 1 - out[d]
        out[first + length] = 1 + rng.uniform(0.2, 0.6) * min(1.0, deficit)
    return out


def build_hard_series(rng: random.Random, kind: str) -> Series:
    start = dt.date(2025, rng.randint(1, 9), 20)
    if kind == "sparse":
        return _sparse(rng, start)
    base = rng.uniform(500, 20000)
    weekend = rng.uniform(0.5, 0.9) if rng.random() < 0.6 else 1.0
    heavy = kind == "heavy-tail"
    noise = rng.uniform(0.03, 0.08) if heavy else rng.uniform(0.03, 0.15)
    level, taken = _level(rng, kind, base)
    month_end = _month_end_days(start, rng.choice([2, 3])) if kind == "month-end" else set()
    month_start = {i for i in range(DAYS) if _day(start, i).day == 1}
    end_factor, start_factor = rng.uniform(1.5, 3.0), rng.uniform(1.2, 2.0)
    holidays = _holidays(rng) if kind == "holidays" else {}
    lag = (
        set(rng.sample(range(WARM_UP, DAYS - 1), rng.randint(3, 6)))
        if kind == "bill-lag"
        else set()
    )
    taken |= month_end | set(holidays) | lag | {d + 1 for d in lag}
    if kind == "month-end":
        taken |= month_start
    # Heavy-tailed noise: its standard deviation is sqrt(3) x the scale.
    extra, labels = _events(rng, level, noise * (math.sqrt(3) if heavy else 1.0), taken)
    values = []
    for i in range(DAYS):
        value = level[i] * (weekend if _day(start, i).weekday() >= 5 else 1.0)
        if i in month_end:
            value *= end_factor
        elif kind == "month-end" and i in month_start:
            value *= start_factor
        value *= holidays.get(i, 1.0)
        shock = _student_t(rng, 3) if heavy else rng.gauss(0, 1)
        value *= max(0.0, 1 + noise * shock)
        value += extra[i] * max(0.0, 1 + rng.gauss(0, noise))
        values.append(value)
    for d in sorted(lag):
        booked = values[d] * rng.uniform(0.0, 0.3)
        values[d + 1] += values[d] - booked
        values[d] = booked
    values = [round(v, 2) for v in values]
    traits = {kind} | ({"weekly"} if weekend < 1 else set())
    return Series(start, values, sorted(labels, key=lambda label: label.start), traits, kind)


def build_hard_corpus(rng: random.Random, per_kind: int) -> list[Series]:
    return [build_hard_series(rng, kind) for kind in KINDS for _ in range(per_kind)]
