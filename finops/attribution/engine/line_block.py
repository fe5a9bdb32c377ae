"""Line items as columns (issue 34): a LineBlock holds many line items as NumPy arrays, the
columns the vectorised pass (vector.py) splits, so a month's hourly node lines need never be a
LineItem each. What lines share (node, GPUs, owner, pool, provider, currency) is a template per
line (LineTemplate), most often one per billed node.

A block comes from the service's column read (attribution/inputs/line_columns.py, PostgreSQL)
or from LineItem values (LineBlock.of_items, every other path); LineBlock.items gives the lines
back as LineItem values for the per-row engine (nodes it must take: engine/vector.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from finops.attribution.engine.units import decimal_to_units, units_to_decimal
from finops.attribution.engine.values import LineItem

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
# Every amount of a block is below this in magnitude (units of 10^-12: 2.3 million in the
# currency), so a column's difference to the cost fits int64 (vector_split.py); larger line
# items stay LineItem values for the per-row engine.
AMOUNT_LIMIT = 2**61


class LineTemplate(NamedTuple):
    """What a LineItem takes from its billed resource (LineItem's fields of the same names)."""

    node: str | None
    gpus: int | None
    category: str
    team_id: int | None
    spread_pool: str | None
    provider: str
    currency: str


@dataclass(slots=True)
class LineBlock:
    """Line items as columns: id, charge period (epoch seconds), EffectiveCost, ListCost (the
    on-demand equivalent) and ContractedCost in integer units of 10^-12 (units.MONEY_PLACES),
    ledger group, and the index of the line's template. Lines without a shared-cost rule only
    (a LineTemplate has none)."""

    id: I64
    start: I64
    end: I64
    cost: I64
    list_cost: I64
    contracted: I64
    group: I64
    template: I64
    templates: list[LineTemplate]

    def __len__(self) -> int:
        return len(self.id)

    @classmethod
    def empty(cls) -> LineBlock:
        none = np.zeros(0, dtype=np.int64)
        return cls(none, none, none, none, none, none, none, none, [])

    @classmethod
    def of_items(cls, lines: list[LineItem]) -> LineBlock:
        """The lines as a block (amounts must fit int64 units: the caller checks)."""
        index: dict[LineTemplate, int] = {}
        units: dict[object, int] = {}

        def to_units(amount: object) -> int:
            found = units.get(amount)
            if found is None:
                found = units[amount] = decimal_to_units(amount)  # type: ignore[arg-type]
            return found

        template = [
            index.setdefault(
                LineTemplate(line.node, line.gpus, line.category, line.team_id,
                             line.spread_pool, line.provider, line.currency),
                len(index),
            )
            for line in lines
        ]  # fmt: skip

        def column(values: list[int]) -> I64:
            return np.array(values, dtype=np.int64).reshape(-1)

        return cls(
            column([line.id for line in lines]),
            column([line.start for line in lines]),
            column([line.end for line in lines]),
            column([to_units(line.cost) for line in lines]),
            column([to_units(line.list_cost) for line in lines]),
            column([to_units(line.contracted_cost) for line in lines]),
            column([line.group for line in lines]),
            column(template),
            list(index),
        )

    def take(self, mask: Mask | I64) -> LineBlock:
        """The lines chosen by a mask or by indexes, in that order."""
        return LineBlock(
            self.id[mask], self.start[mask], self.end[mask], self.cost[mask],
            self.list_cost[mask], self.contracted[mask], self.group[mask], self.template[mask],
            self.templates,
        )  # fmt: skip

    def concat(self, other: LineBlock) -> LineBlock:
        """Both blocks' lines (other's templates renumbered after this one's)."""
        if not len(other):
            return self
        if not len(self):
            return other
        shift = len(self.templates)

        def both(x: I64, y: I64) -> I64:
            return np.concatenate([x, y])

        return LineBlock(
            both(self.id, other.id), both(self.start, other.start), both(self.end, other.end),
            both(self.cost, other.cost), both(self.list_cost, other.list_cost),
            both(self.contracted, other.contracted), both(self.group, other.group),
            both(self.template, other.template + shift), self.templates + other.templates,
        )  # fmt: skip

    def per_template(self, values: list[int]) -> I64:
        """An integer per template, for every line."""
        return np.array(values, dtype=np.int64).reshape(-1)[self.template]

    def node_names(self) -> list[str | None]:
        return [t.node for t in self.templates]

    def items(self) -> list[LineItem]:
        """The lines as LineItem values, in the block's order."""
        decimals: dict[int, object] = {}

        def amount(units: int) -> object:
            found = decimals.get(units)
            if found is None:
                found = decimals[units] = units_to_decimal(units)
            return found

        make, templates = LineItem, self.templates
        return [
            make(
                i, s, e, amount(c), t.node, t.gpus, t.category, t.team_id, g, t.provider,  # type: ignore[arg-type]
                t.currency, t.spread_pool, None, amount(lc), amount(cc),  # type: ignore[arg-type]
            )
            for i, s, e, c, lc, cc, g, t in zip(
                self.id.tolist(), self.start.tolist(), self.end.tolist(), self.cost.tolist(),
                self.list_cost.tolist(), self.contracted.tolist(), self.group.tolist(),
                [templates[x] for x in self.template.tolist()], strict=True,
            )
        ]  # fmt: skip
