"""What the parts of a month wrote themselves, as the reduce needs it (partial.py, ledger.write).

On PostgreSQL each part COPYs the ledger rows that nothing else can change (partial.stage_pick)
into a staging table of its own (staging.py), and sends the reduce only sums of those rows:
the conservation check's (per provider, account, currency and column), the rollups' (per
team-day and per run), each team's direct spend (what shared costs are split by), and the
budgets' charge sums of its line items. The reduce adds them to the same sums of the rows it
holds, so it never reads or holds the staged rows; the server copies them into the month's
ledger in the reduce's transaction.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from finops.attribution.inputs.charge_rollups import ChargeSums
from finops.attribution.ledger.rollup_sums import (
    Bill,
    DailyKey,
    RunAcc,
    RunKey,
    daily_from_state,
    daily_merge,
    daily_state,
    runs_from_state,
    runs_merge,
    runs_state,
)

# (provider, currency) -> team id -> training + inference units; ("", currency): any provider.
GpuSpend = dict[tuple[str, str], dict[int, int]]


@dataclass(slots=True)
class Staged:
    """Staged rows of one part, or of the month (merge). charges: the budgets' charge sums of
    the line items read (None: not summed by every part; ledger.write reads them)."""

    # (staging table, rows it holds)
    tables: list[tuple[str, int]] = field(default_factory=list)
    allocated: Bill = field(default_factory=dict)
    daily: dict[DailyKey, list[Any]] = field(default_factory=dict)
    runs: dict[RunKey, RunAcc] = field(default_factory=dict)
    spend: dict[int, int] = field(default_factory=dict)
    gpu: GpuSpend = field(default_factory=dict)
    charges: ChargeSums | None = None

    @property
    def rows(self) -> int:
        return sum(n for _, n in self.tables)

    def merge(self, other: Staged | None) -> None:
        """Add another part's; a part without charge sums leaves the month without them."""
        if other is None:
            self.charges = None
            return
        self.tables.extend(other.tables)
        for key, units in other.allocated.items():
            self.allocated[key] = self.allocated.get(key, 0) + units
        daily_merge(self.daily, other.daily)
        runs_merge(self.runs, other.runs)
        for team_id, units in other.spend.items():
            self.spend[team_id] = self.spend.get(team_id, 0) + units
        for scope, per_team in other.gpu.items():
            mine = self.gpu.setdefault(scope, {})
            for team_id, units in per_team.items():
                mine[team_id] = mine.get(team_id, 0) + units
        if self.charges is not None and other.charges is not None:
            _charges_merge(self.charges, other.charges)
        else:
            self.charges = None

    def state(self) -> dict[str, Any]:
        """Plain values for marshal (PartResult.dumps)."""
        return {
            "tables": self.tables,
            "allocated": self.allocated,
            "daily": daily_state(self.daily),
            "runs": runs_state(self.runs),
            "spend": self.spend,
            "gpu": self.gpu,
            "charges": None if self.charges is None else _charges_state(self.charges),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Staged:
        charges = None
        if state["charges"] is not None:
            charges = _charges_from_state(state["charges"])
        return cls(
            [tuple(t) for t in state["tables"]],  # type: ignore[misc]
            state["allocated"],
            daily_from_state(state["daily"]),
            runs_from_state(state["runs"]),
            state["spend"],
            state["gpu"],
            charges,
        )


# ChargeSums keys end with the charge period (start, end): datetimes, sent as ISO text.
def _charges_state(charges: ChargeSums) -> tuple[list[Any], list[Any]]:
    recurring, tagged = charges.sums()
    return (
        [(*key[:-2], key[-2].isoformat(), key[-1].isoformat(), str(v)) for key, v in recurring],
        [(*key[:-2], key[-2].isoformat(), key[-1].isoformat(), str(v)) for key, v in tagged],
    )


def _charges_from_state(state: tuple[list[Any], list[Any]]) -> ChargeSums:
    charges = ChargeSums()
    recurring, tagged = ([(
        (*row[:-3], dt.datetime.fromisoformat(row[-3]), dt.datetime.fromisoformat(row[-2])),
        Decimal(row[-1]),
    ) for row in rows] for rows in state)  # fmt: skip
    charges.sums_add(recurring, tagged)
    return charges


def _charges_merge(into: ChargeSums, other: ChargeSums) -> None:
    into.sums_add(*other.sums())
