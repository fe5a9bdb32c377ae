"""Budget forecast backtest: the month-end forecast made on days 7, 14 and 21, against the naive
run-rate (month to date / days elapsed x days in the month, what OptScale does), in one run.

    .venv/bin/python bench/forecast.py                 # 200 synthetic series per kind + demo
    .venv/bin/python bench/forecast.py --series 50     # quicker

Series:
- synthetic, two months of history then the target month (seeded, 10 % daily noise):
  `flat`, `weekly` (weekends at 30 % of weekdays), `growing` (+1.5 % a day), `fees` (flat usage
  plus a fee on the 1st of each month of 5-10 days' usage: a recurring charge), `level change`
  (the level x 0.4-0.7 or x 1.5-2.5 from a day 3-21 days before the month), `month-end` (the
  last 3 days of each month at 2.5x), `heavy-tail` (Student-t noise, 3 degrees of freedom);
- `demo`: the demo generator (finops.demo, small scale, seed 42) for August to October 2025,
  each provider's FOCUS rows spread over their charge period's days as the ledger books them
  (support fees are Purchases over the whole month: recurring, known for the month once billed).

Both methods see the same days 1..k of the target month (no bill lag here: this compares the
models). The forecast under test is finops.budgets.forecast.forecast_rest, exactly as budgets
call it: usage history without recurring charges, recurring charges after day k passed on their
days. Error: mean absolute percentage error of the month's total over the series of a kind.
Goal: >= 30 % lower error than run-rate on `weekly` and `fees`, never worse on `flat`.

Band: how often the forecast's p10..p90 held the month's actual total, per kind, with the band
calibrated on the history's last weeks (finops.budgets.forecast._calibrate) and as before (the
fit's own spread, forecast_rest(calibrated=False)), in the same run. Goal: 80 % +- 10 %. The
calibration's constants were set on --seed 7; --seed 11 gives held-out series.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")

import django

django.setup()

from finops.budgets.forecast import ForecastInput, forecast_rest, run_rate_forecast  # noqa: E402

DAYS = (7, 14, 21)
KINDS = ("flat", "weekly", "growing", "fees", "level change", "month-end", "heavy-tail")
CENT = Decimal("0.01")


@dataclass
class Series:
    """Daily usage and recurring charges; the target month is `month` (history before it)."""

    month: date
    usage: dict[date, Decimal] = field(default_factory=dict)
    recurring: dict[date, Decimal] = field(default_factory=dict)

    def month_days(self) -> list[date]:
        nxt = (self.month.replace(day=28) + timedelta(days=4)).replace(day=1)
        return [self.month + timedelta(days=i) for i in range((nxt - self.month).days)]

    def total(self, day: date) -> Decimal:
        return self.usage.get(day, Decimal(0)) + self.recurring.get(day, Decimal(0))


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def _synthetic(kind: str, rng: random.Random, month: date) -> Series:
    start = (month - timedelta(days=62)).replace(day=1)
    series = Series(month=month)
    base = rng.uniform(500, 2000)
    fee = base * rng.uniform(5, 10)
    last = series.month_days()[-1]
    change = month - timedelta(days=rng.randint(3, 21))
    factor = rng.choice([rng.uniform(0.4, 0.7), rng.uniform(1.5, 2.5)])
    for t, day in enumerate(_days(start, last)):
        level = base
        if kind == "weekly" and day.weekday() >= 5:
            level = base * 0.3
        if kind == "growing":
            level = base * (1 + 0.015 * t)
        if kind == "level change" and day >= change:
            level = base * factor
        if kind == "month-end" and (day + timedelta(days=3)).month != day.month:
            level = base * 2.5
        shock = rng.gauss(0, 1)
        if kind == "heavy-tail":
            shock /= (sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3) ** 0.5
        value = max(level * (1 + 0.10 * shock), 0)
        series.usage[day] = Decimal(str(value)).quantize(CENT)
        if kind == "fees" and day.day == 1:
            series.recurring[day] = Decimal(str(fee)).quantize(CENT)
    return series


def _demo_series() -> dict[str, Series]:
    """One series per demo provider (and the organisation): three generated months."""
    from finops.budgets.series import spread_by_day
    from finops.demo.dataset import dataset_build
    from finops.demo.fleet import Month, Scale

    months = [date(2025, 8, 1), date(2025, 9, 1), date(2025, 10, 1)]
    usage: dict[str, dict[date, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    recurring: dict[str, dict[date, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for first in months:
        dataset = dataset_build(seed=42, month=Month(first.year, first.month), scale=Scale.SMALL)
        for provider, rows in dataset.bills.items():
            for row in rows:
                start = dt.datetime.fromisoformat(row["ChargePeriodStart"].replace("Z", "+00:00"))
                end = dt.datetime.fromisoformat(row["ChargePeriodEnd"].replace("Z", "+00:00"))
                cost = Fraction(Decimal(row["EffectiveCost"] or "0"))
                is_fee = row["ChargeCategory"] == "Purchase" and end - start >= timedelta(days=1)
                target = recurring if is_fee else usage
                for day, part in spread_by_day(
                    start=start, end=end, amount=cost, first=months[0], last=date(2025, 10, 31)
                ):
                    target[provider][day] += part
                    target["organisation"][day] += part
    out = {}
    for key in usage:
        series = Series(month=months[-1])
        series.usage = {d: Decimal(float(v)).quantize(CENT) for d, v in usage[key].items()}
        series.recurring = {d: Decimal(float(v)).quantize(CENT) for d, v in recurring[key].items()}
        out[key] = series
    return out


def _errors(series: Series, k: int) -> tuple[float, float, bool, bool]:
    """(forecast error, run-rate error) of the month total, as fractions of the actual total,
    and whether the p10..p90 band held the actual total: calibrated, and as before (the band
    of the fit's own spread, forecast_rest(calibrated=False))."""
    days = series.month_days()
    actual = sum((series.total(d) for d in days), Decimal(0))
    as_of = days[k - 1]
    to_date = sum((series.total(d) for d in days[:k]), Decimal(0))
    history_days = sorted(d for d in series.usage if d <= as_of)
    data = ForecastInput(
        history=[series.usage[d] for d in history_days],
        complete_through=as_of,
        as_of=as_of,
        period_end=days[-1],
        recurring={d: v for d, v in series.recurring.items() if as_of < d <= days[-1]},
    )
    rest = forecast_rest(data)
    before = forecast_rest(data, calibrated=False)
    ours = to_date + rest.expected
    naive = run_rate_forecast(month_to_date=to_date, days_elapsed=k, days_in_period=len(days))
    covered = to_date + rest.low <= actual <= to_date + rest.high
    covered_before = to_date + before.low <= actual <= to_date + before.high
    return (
        float(abs(ours - actual) / actual),
        float(abs(naive - actual) / actual),
        covered,
        covered_before,
    )


Row = tuple[str, int, float, float, float, float]


def _report(name: str, group: list[Series], results: dict[str, list[Row]]) -> None:
    for k in DAYS:
        pairs = [_errors(s, k) for s in group]
        ours = sum(p[0] for p in pairs) / len(pairs)
        naive = sum(p[1] for p in pairs) / len(pairs)
        coverage = sum(p[2] for p in pairs) / len(pairs)
        coverage_before = sum(p[3] for p in pairs) / len(pairs)
        results[name].append((name, k, ours, naive, coverage, coverage_before))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=200, help="synthetic series per kind")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    targets = [date(2025, 9, 1), date(2025, 10, 1), date(2026, 2, 1), date(2026, 3, 1)]
    results: dict[str, list[Row]] = defaultdict(list)

    def group(kind: str) -> list[Series]:
        return [_synthetic(kind, rng, targets[i % len(targets)]) for i in range(args.series)]

    makers: dict[str, Callable[[], list[Series]]] = {kind: partial(group, kind) for kind in KINDS}
    for kind, make in makers.items():
        _report(kind, make(), results)
    demo = _demo_series()
    _report("demo (providers + org)", list(demo.values()), results)

    print(
        f"{'series':<24} {'day':>4} {'forecast MAPE':>14} {'run-rate MAPE':>14} {'reduction':>10}"
        f" {'p10-p90 holds: before':>22} {'after':>6}"
    )
    for rows in results.values():
        for name, k, ours, naive, coverage, before in rows:
            reduction = (1 - ours / naive) * 100 if naive else 0.0
            print(
                f"{name:<24} {k:>4} {ours * 100:>13.2f}% {naive * 100:>13.2f}% {reduction:>9.1f}%"
                f" {before * 100:>21.1f}% {coverage * 100:>5.1f}%"
            )
    print()
    for kind, rows in results.items():
        after = sum(r[4] for r in rows) / len(rows)
        before = sum(r[5] for r in rows) / len(rows)
        verdict = "met" if 0.70 <= after <= 0.90 else "NOT met"
        print(f"{kind}: the p10-p90 band held the month's total {before * 100:.1f}% of the time "
              f"before, {after * 100:.1f}% after (goal 80 +- 10 %): {verdict}")  # fmt: skip
    print()
    for kind, goal in (("weekly", 30.0), ("fees", 30.0), ("flat", 0.0)):
        ours = sum(r[2] for r in results[kind]) / len(DAYS)
        naive = sum(r[3] for r in results[kind]) / len(DAYS)
        reduction = (1 - ours / naive) * 100
        verdict = "met" if reduction >= goal else "NOT met"
        print(f"{kind}: mean over days {DAYS}: {reduction:.1f}% lower error (goal >= {goal:.0f}%)"
              f": {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
