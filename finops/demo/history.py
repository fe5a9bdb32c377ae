"""The months of a several-month demo and what sets each apart, as real fleets show it:

- growth: the on-demand and spot pools run ~60 % of today's nodes six months ago, more each month;
- weekly seasonality: half of each on-demand pool is scaled down at weekends;
- a commitment purchase: the Azure H100 reservation is bought half-way; before it, those nodes
  ran on demand (the reservation's monthly fee is then amortised over the hours it covers);
- a spot fleet whose preempted Slurm jobs are requeued under their JobID (`sacct -D` attempts);
- a runaway resource: eight p5 nodes of a forgotten evaluation cluster left running idle for six
  days of the last month (tagged project=llama, so the language team's spend spikes);
- a restatement: the AWS bill of an earlier month delivered again with an SLA credit.

Pure: months and plans from (last month, count); no database.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from finops.demo.fleet import FleetPlan, Month, Pool, Pricing
from finops.demo.focus_catalogue import Row

# Oldest month's share of today's on-demand and spot nodes.
FIRST_GROWTH = 0.6
# Bought at the start of this month (index from the oldest): before it, the pool ran on demand.
RESERVATION = "reservation"
ALWAYS_BOUGHT = frozenset({"savings_plan", "cud"})
# The runaway: eight idle p5.48xlarge, tagged to a project the language team owns.
RUNAWAY_POOL = Pool("p5.48xlarge", Pricing.STANDARD, "h100-eval", 8, 2, tag=("project", "llama"))
RUNAWAY_FIRST_DAY = 11  # 0-based: the 12th of the month
RUNAWAY_DAYS = 6
# The restated month: this many months before the last one.
RESTATED_MONTHS_BACK = 3
RESTATEMENT_CREDIT = Decimal("-18400.00")
RESTATEMENT_DESCRIPTION = "SLA credit: p5 capacity unavailable (restated bill)"


@dataclass(frozen=True)
class MonthPlan:
    month: Month
    index: int  # 0 = oldest
    count: int
    fleet: FleetPlan

    @property
    def last(self) -> bool:
        return self.index == self.count - 1


def months_back(last: Month, back: int) -> Month:
    serial = last.year * 12 + (last.month - 1) - back
    return Month(serial // 12, serial % 12 + 1)


def reservation_month(count: int) -> int:
    """Index of the month the Azure reservation is bought in (the middle of the history)."""
    return count // 2


def history_plans(*, last: Month, count: int) -> list[MonthPlan]:
    plans = []
    for index in range(count):
        growth = 1.0 if count == 1 else FIRST_GROWTH + (1 - FIRST_GROWTH) * index / (count - 1)
        bought = ALWAYS_BOUGHT | ({RESERVATION} if index >= reservation_month(count) else set())
        runaway = ((RUNAWAY_POOL, RUNAWAY_FIRST_DAY, RUNAWAY_DAYS),) if index == count - 1 else ()
        fleet = FleetPlan(
            growth=growth, commitments=frozenset(bought), weekends_off=True, runaway=runaway
        )
        plans.append(
            MonthPlan(month=months_back(last, count - 1 - index), index=index, count=count,
                      fleet=fleet)
        )  # fmt: skip
    return plans


def restated_index(count: int) -> int | None:
    """The month whose AWS bill is delivered again, or None when the history is too short."""
    index = count - 1 - RESTATED_MONTHS_BACK
    return index if index >= 0 else None


def restatement_row(rows: list[Row]) -> Row:
    """The SLA credit the restated AWS bill adds: a one-time Credit row like the month's own
    Activate credit, for the whole month."""
    template = next(r for r in rows if r["ChargeCategory"] == "Credit")
    amount = f"{RESTATEMENT_CREDIT:.2f}"
    return {
        **template,
        "ChargeDescription": RESTATEMENT_DESCRIPTION,
        "BilledCost": amount,
        "EffectiveCost": amount,
        "PricingCurrencyEffectiveCost": amount,
    }
