"""Budget forecast band on a demo database: how often the p10-p90 band made on day D of a past
month held that month's actual total, per budget, as the budgets page computes it.

    DATABASE_URL=sqlite:////tmp/<you>-demo.sqlite3 .venv/bin/python manage.py demo --months 6
    DATABASE_URL=sqlite:////tmp/<you>-demo.sqlite3 .venv/bin/python bench/forecast_demo.py

For every monthly budget in the database (the demo makes one per team and one for the
organisation) and one per provider (made here, not saved), and every month of the ledger whose
last day the ledger holds, the budget's status is computed as of days 7, 14 and 21 of that month
(`finops.budgets.selectors.budget_statuses`, exactly what the budgets page and the alerts use:
bill lag, recurring charges, each provider's forecast) and compared with the status as of the
month's last day (the actual). The first month is left out: its forecasts have no history.

The ledger holds the whole six months, so a backtest sees every day up to D booked (no bill
lag in the data themselves: the lag days are read as booked, which helps the forecast a little).
Prints each forecast (band, actual, where the actual fell in the band: -1 the p10, +1 the p90),
then coverage per day and per kind of budget, and the band's median relative width. Goal: 80 %
+- 10 % (the goal of bench/forecast.py's synthetic kinds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "finops.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from finops.attribution.models import TeamDailyCost  # noqa: E402
from finops.budgets.models import Budget  # noqa: E402
from finops.budgets.selectors import budget_statuses  # noqa: E402
from finops.core.months import month_add, month_format  # noqa: E402

DAYS = (7, 14, 21)


@dataclass(frozen=True)
class Trial:
    budget: str
    kind: str
    month: date
    day: int
    low: Decimal
    expected: Decimal
    high: Decimal
    actual: Decimal

    @property
    def held(self) -> bool:
        return self.low <= self.actual <= self.high

    @property
    def position(self) -> float:
        """Where the actual fell: 0 at the forecast, -1 at p10, +1 at p90."""
        half = (self.high - self.low) / 2
        if half <= 0:
            return float("inf") if self.actual != self.expected else 0.0
        centre = (self.high + self.low) / 2
        return float((self.actual - centre) / half)

    @property
    def width(self) -> float:
        return float((self.high - self.low) / self.actual) if self.actual else 0.0


def _budgets() -> list[tuple[str, Budget]]:
    """(kind, budget): the database's monthly budgets, and one unsaved budget per provider."""
    currency = settings.FINOPS_REPORTING_CURRENCY
    out: list[tuple[str, Budget]] = []
    for budget in Budget.objects.filter(period=Budget.Period.MONTH).select_related("team"):
        out.append(("team" if budget.team_id else "organisation", budget))
    providers = TeamDailyCost.objects.order_by().values_list("provider_name", flat=True).distinct()
    for provider in sorted(set(providers)):
        out.append(
            (
                "provider",
                Budget(
                    name=f"{provider} (provider)",
                    provider_name=provider,
                    period=Budget.Period.MONTH,
                    amount=Decimal(1),
                    currency=currency,
                ),
            )
        )
    return out


def _months() -> list[date]:
    """First days of the ledger's months whose last day is in the ledger, but the first."""
    days = TeamDailyCost.objects.order_by().values_list("day", flat=True)
    first, last = min(days), max(days)
    months = []
    month = month_add(first.replace(day=1), 1)
    while month_add(month, 1) - timedelta(days=1) <= last:
        months.append(month)
        month = month_add(month, 1)
    return months


def trials() -> list[Trial]:
    pairs = _budgets()
    budgets = [b for _, b in pairs]
    out = []
    for month in _months():
        end = month_add(month, 1) - timedelta(days=1)
        actuals = [s.actual for s in budget_statuses(budgets=budgets, as_of=end)]
        for day in DAYS:
            statuses = budget_statuses(budgets=budgets, as_of=month.replace(day=day))
            for (kind, budget), status, actual in zip(pairs, statuses, actuals, strict=True):
                if status.error or actual <= 0:
                    continue
                out.append(
                    Trial(budget.name, kind, month, day, status.forecast_low, status.forecast,
                          status.forecast_high, actual)
                )  # fmt: skip
    return out


def _coverage(rows: list[Trial]) -> str:
    held = sum(t.held for t in rows)
    width = statistics.median(t.width for t in rows) * 100 if rows else 0.0
    return f"{held}/{len(rows)} = {held / len(rows) * 100:5.1f} %, median width {width:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quiet", action="store_true", help="totals only")
    args = parser.parse_args()
    rows = trials()
    currency = settings.FINOPS_REPORTING_CURRENCY
    if not args.quiet:
        print(f"{currency}; p10, forecast and p90 are estimates, the actual is the ledger's")
        print(f"{'budget':34} {'month':>8} {'day':>3} {'p10':>14} {'forecast':>14} {'p90':>14} "
              f"{'actual':>14} {'position':>8}")  # fmt: skip
        for t in rows:
            print(f"{t.budget[:34]:34} {month_format(t.month):>8} {t.day:>3} {t.low:>14,.2f} "
                  f"{t.expected:>14,.2f} {t.high:>14,.2f} {t.actual:>14,.2f} "
                  f"{t.position:>+8.2f}{'' if t.held else '  missed'}")  # fmt: skip
        print()
    print(f"p10-p90 band held the month's actual (goal 80 % +- 10 %), {len(rows)} forecasts:")
    print(f"  all: {_coverage(rows)}")
    by_day: dict[str, list[Trial]] = defaultdict(list)
    for t in rows:
        by_day[f"day {t.day}"].append(t)
        by_day[t.kind].append(t)
    for key, group in by_day.items():
        print(f"  {key}: {_coverage(group)}")
    below = sum(1 for t in rows if not t.held and t.position < 0)
    print(f"  misses: {below} below the band, {sum(not t.held for t in rows) - below} above it")


if __name__ == "__main__":
    main()
