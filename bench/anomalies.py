"""Anomaly detection quality on labelled daily cost series, against the rules peers ship.

    .venv/bin/python bench/anomalies.py [--series 300] [--seed 7]

Builds `--series` seeded daily series of 91 days (from the 20th of a month, so the first month
start falls in the 14-day warm-up): base level 500-20,000 a day, multiplicative noise 2-20 %
(each series its own), weekly seasonality (weekends at 50-90 %) on 60 %, gradual linear growth
(0.3-1.5 % of the base a day, which must NOT alert) on 30 %, a fee of 0.5-2x the base on the 1st
of every month on 30 %, 1-3 holidays (usage 30-60 %) on 30 %, and 0-2 labelled events each:
spikes (one day) and level shifts (10-30 days or to the end), adding 6-18 noise standard
deviations (at least 30 %) of the day's weekday level, never on a holiday or a month start.

Each method sees each series day by day (only the past) and may not alert in the first 14 days;
every method gets the same floors (impact >= 100, >= +20 %) and looks upward only, so the
comparison is about the statistics, not the floors. Alert days of a baseline are merged into
events when at most one day apart. A detected event is a true positive when it starts within
the label's window (a spike: its day or the next; a level shift: its first 7 days); several
detections of one label all count as true positives (lenient to the baselines, which re-fire
during a shift), each label counts once for recall. Delay: days from the label's first day to
the day the method reported it (ours: the day the event cleared both floors).

Methods: ours (`finops.anomalies.detector.detect`); OptScale's rule (today > mean of the last 7
days x 1.2); Kubecost's spend change (today vs the mean of the previous 30 days, relative
threshold 20 %); a plain z-score (today vs mean and standard deviation of the last 28 days,
z > 3).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anomaly_series import KINDS, Label, Series, build_hard_corpus

from finops.anomalies.detector import DetectorSettings, detect

DAYS = 91
WARM_UP = 14
MIN_IMPACT = 100.0
MIN_PERCENT = 0.20


def _month_starts(start: dt.date) -> set[int]:
    return {i for i in range(DAYS) if (start + dt.timedelta(days=i)).day == 1}


@dataclass
class _Shape:
    """The regular behaviour of a series (before noise and anomalies)."""

    weekend: float = 1.0
    growth: float = 0.0
    fee: float = 0.0
    holidays: set[int] = field(default_factory=set)
    traits: set[str] = field(default_factory=set)


def _shape(rng: random.Random, base: float, month_starts: set[int]) -> _Shape:
    # The draws keep their order: the same seed gives the same series as before the split.
    shape = _Shape()
    if rng.random() < 0.6:
        shape.weekend = rng.uniform(0.5, 0.9)
        shape.traits.add("weekly")
    if rng.random() < 0.3:
        shape.growth = rng.uniform(0.003, 0.015)
        shape.traits.add("growth")
    if rng.random() < 0.3:
        shape.fee = rng.uniform(0.5, 2.0) * base
        shape.traits.add("month-start fee")
    if rng.random() < 0.3:
        days = {rng.randint(WARM_UP, DAYS - 1) for _ in range(rng.randint(1, 3))}
        shape.holidays = days - month_starts
        shape.traits.add("holidays")
    return shape


def _anomalies(
    rng: random.Random, level: list[float], noise: float, taken: set[int]
) -> tuple[list[float], list[Label]]:
    """Up to two spikes or level shifts, apart from each other and from the days in taken: the
    extra cost per day and their labels."""
    extra = [0.0] * DAYS
    labels: list[Label] = []
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        magnitude = max(0.30, 6 * noise) * rng.uniform(1.0, 3.0)
        for _attempt in range(20):
            first = rng.randint(WARM_UP + 6, DAYS - 5)
            if rng.random() < 0.5:
                kind, end = "spike", first
            else:
                kind, end = "level_shift", min(DAYS - 1, first + rng.choice([10, 20, 30, DAYS]))
            span = set(range(first - 8, end + 9))
            if first in taken or span & {
                d for label in labels for d in range(label.start, label.end + 1)
            }:
                continue
            for i in range(first, end + 1):
                extra[i] = level[i] * magnitude
            labels.append(Label(kind, first, end))
            taken |= set(range(first, end + 1))
            break
    return extra, labels


def build_series(rng: random.Random) -> Series:
    start = dt.date(2025, rng.randint(1, 9), 20)
    base = rng.uniform(500, 20000)
    noise = rng.uniform(0.02, 0.20)
    month_starts = _month_starts(start)
    shape = _shape(rng, base, month_starts)
    level = [base * (1 + shape.growth * i) for i in range(DAYS)]
    extra, labels = _anomalies(rng, level, noise, set(shape.holidays) | month_starts)
    values = []
    for i in range(DAYS):
        day = start + dt.timedelta(days=i)
        value = level[i] * (shape.weekend if day.weekday() >= 5 else 1.0)
        if i in shape.holidays:
            value *= rng.uniform(0.3, 0.6)
        value *= max(0.0, 1 + rng.gauss(0, noise))
        if i in month_starts:
            value += shape.fee
        value += extra[i] * max(0.0, 1 + rng.gauss(0, noise))
        values.append(round(value, 2))
    return Series(start, values, sorted(labels, key=lambda label: label.start), shape.traits)


# --- methods: each returns [(first day, reported day)] of its events ---------------------------

Events = list[tuple[int, int]]


def _ours(**rules: bool) -> Callable[[Series], Events]:
    """The detector with the bench's floors; `rules` switch DetectorSettings' rules."""

    def run(series: Series) -> Events:
        days = [series.start + dt.timedelta(days=i) for i in range(DAYS)]
        settings = DetectorSettings(
            min_impact=Decimal(int(MIN_IMPACT)),
            min_percent=Decimal(int(MIN_PERCENT * 100)),
            **rules,  # type: ignore[arg-type]
        )
        detection = detect(days, [Decimal(str(v)) for v in series.values], settings=settings)
        return [((e.first - series.start).days, (e.reported_on - series.start).days)
                for e in detection.events]  # fmt: skip

    return run


ours = _ours()


def _rule(alert: Callable[[list[float], float], bool]) -> Callable[[Series], Events]:
    """A peer's rule, evaluated day by day; alert days merged into events (gaps <= 1 day)."""

    def run(series: Series) -> Events:
        alerts = [i for i in range(WARM_UP, DAYS) if alert(series.values[:i], series.values[i])]
        events: Events = []
        for i in alerts:
            if events and i - events[-1][1] <= 2:
                events[-1] = (events[-1][0], i)
            else:
                events.append((i, i))
        return [(first, first) for first, _ in events]

    return run


def _floors(today: float, expected: float) -> bool:
    return today - expected >= MIN_IMPACT and today >= expected * (1 + MIN_PERCENT)


def optscale(history: list[float], today: float) -> bool:
    mean = statistics.fmean(history[-7:])
    return today > mean * 1.2 and _floors(today, mean)


def kubecost(history: list[float], today: float) -> bool:
    mean = statistics.fmean(history[-30:])
    return mean > 0 and (today - mean) / mean > 0.20 and _floors(today, mean)


def zscore(history: list[float], today: float) -> bool:
    window = history[-28:]
    mean, sd = statistics.fmean(window), statistics.pstdev(window)
    return sd > 0 and (today - mean) / sd > 3 and _floors(today, mean)


BEFORE = "ours, issue 28 rules off"
HARD_METHODS: dict[str, Callable[[Series], Events]] = {
    BEFORE: _ours(
        month_end=False, catch_up=False, adapt_level=False, sparse_rule=False, ramp=False
    ),
    "ours + month end": _ours(catch_up=False, adapt_level=False, sparse_rule=False, ramp=False),
    "ours + catch-up": _ours(month_end=False, adapt_level=False, sparse_rule=False, ramp=False),
    "ours + level adapt": _ours(month_end=False, catch_up=False, sparse_rule=False, ramp=False),
    "ours + sparse rule": _ours(month_end=False, catch_up=False, adapt_level=False, ramp=False),
    "ours + ramp": _ours(month_end=False, catch_up=False, adapt_level=False, sparse_rule=False),
    "ours, ramp rule off": _ours(ramp=False),
}
METHODS: dict[str, Callable[[Series], Events]] = {
    "ours (robust seasonal)": ours,
    BEFORE: HARD_METHODS[BEFORE],
    "OptScale (mean 7d x 1.2)": _rule(optscale),
    "Kubecost (vs 30d mean, 20 %)": _rule(kubecost),
    "z-score (28d, z > 3)": _rule(zscore),
}


def _window(label: Label) -> range:
    return range(label.start, label.start + (2 if label.kind == "spike" else 7))


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    labels: int = 0
    found: int = 0
    delays: list[int] = field(default_factory=list)
    fp_traits: dict[str, int] = field(default_factory=dict)

    def line(self, name: str, seconds: float) -> str:
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        recall = self.found / self.labels if self.labels else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        delay = statistics.median(self.delays) if self.delays else float("nan")
        return (f"{name:30} {precision:9.3f} {recall:7.3f} {f1:6.3f} {delay:7.1f} "
                f"{self.tp:5} {self.fp:5} {seconds:7.2f}")  # fmt: skip


def score(series: Series, events: Events, into: Score) -> None:
    into.labels += len(series.labels)
    found: dict[int, int] = {}
    for first, reported in events:
        match = next((k for k, lb in enumerate(series.labels) if first in _window(lb)), None)
        if match is None:
            into.fp += 1
            for trait in series.traits or {"plain"}:
                into.fp_traits[trait] = into.fp_traits.get(trait, 0) + 1
            continue
        into.tp += 1
        found.setdefault(match, reported - series.labels[match].start)
    into.found += len(found)
    into.delays.extend(found.values())


def _table_head() -> None:
    print(f"{'method':30} {'precision':>9} {'recall':>7} {'F1':>6} {'delay_d':>7} "
          f"{'TP':>5} {'FP':>5} {'seconds':>7}")  # fmt: skip


def _current_corpus(corpus: list[Series]) -> None:
    kinds: dict[str, int] = {}
    for s in corpus:
        for label in s.labels:
            kinds[label.kind] = kinds.get(label.kind, 0) + 1
    print(f"{len(corpus)} series x {DAYS} days, labelled events: {kinds}")
    _table_head()
    for name, method in METHODS.items():
        total = Score()
        started = time.perf_counter()
        for s in corpus:
            score(s, method(s), total)
        print(total.line(name, time.perf_counter() - started))
        if total.fp_traits:
            print(
                f"{'':30} false positives by series trait: {dict(sorted(total.fp_traits.items()))}"
            )


@dataclass
class KindScore:
    """One method's figures on the series of one kind."""

    score: Score = field(default_factory=Score)
    series: int = 0
    fp_per_series: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, series: Series, events: Events) -> None:
        before = self.score.fp
        score(series, events, self.score)
        self.series += 1
        self.fp_per_series.append(self.score.fp - before)

    def figures(self) -> tuple[float, float, float]:
        s = self.score
        precision = s.tp / (s.tp + s.fp) if s.tp + s.fp else 0.0
        recall = s.found / s.labels if s.labels else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1


def _hard_corpus(corpus: list[Series]) -> None:
    """Per kind and method: precision, recall, F1, false positives per series (the worst series
    too), and F1 and FP as a ratio to the detector with this issue's rules off, same run."""
    methods = {**HARD_METHODS, **{k: v for k, v in METHODS.items() if k != BEFORE}}
    groups: dict[str, list[Series]] = {
        kind: [s for s in corpus if s.kind == kind] for kind in KINDS
    }
    groups["regular (all but sparse)"] = [s for s in corpus if s.kind != "sparse"]
    results: dict[tuple[str, str], KindScore] = {}
    for name, method in methods.items():
        for s in corpus:
            started = time.perf_counter()
            events = method(s)
            elapsed = time.perf_counter() - started
            for group, members in groups.items():
                if s in members:
                    result = results.setdefault((group, name), KindScore())
                    result.add(s, events)
                    result.seconds += elapsed
    labels = {g: sum(len(s.labels) for s in members) for g, members in groups.items()}
    print(f"\nHard series (bench/anomaly_series.py): {len(corpus)} series x {DAYS} days, "
          f"labelled events per kind: {labels}")  # fmt: skip
    print(f"{'kind':26} {'method':30} {'precision':>9} {'recall':>7} {'F1':>6} {'FP/series':>9} "
          f"{'worst':>5} {'TP':>4} {'FP':>5} {'F1 x before':>11} {'FP x before':>11}")  # fmt: skip
    for group in groups:
        base = results[(group, BEFORE)]
        _, _, base_f1 = base.figures()
        for name in methods:
            r = results[(group, name)]
            precision, recall, f1 = r.figures()
            per_series = r.score.fp / r.series if r.series else 0.0
            f1_ratio = f1 / base_f1 if base_f1 else float("nan")
            fp_ratio = r.score.fp / base.score.fp if base.score.fp else float("nan")
            print(f"{group:26} {name:30} {precision:9.3f} {recall:7.3f} {f1:6.3f} "
                  f"{per_series:9.2f} {max(r.fp_per_series, default=0):5} {r.score.tp:4} "
                  f"{r.score.fp:5} {f1_ratio:11.2f} {fp_ratio:11.2f}")  # fmt: skip
        print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hard-per-kind", type=int, default=40, help="hard series per kind")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")
    rng = random.Random(args.seed)
    corpus = [build_series(rng) for _ in range(args.series)]
    _current_corpus(corpus)
    if args.hard_per_kind > 0:
        _hard_corpus(build_hard_corpus(random.Random(args.seed + 1), args.hard_per_kind))


if __name__ == "__main__":
    main()
