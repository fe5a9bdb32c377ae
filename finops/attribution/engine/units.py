"""Exact money arithmetic of the engine: amounts as integer units of 10^-MONEY_PLACES, and the
largest-remainder splits that make every line item's shares sum to its amount."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from decimal import Context, Decimal
from typing import Protocol

# Must equal finops.core.money.MONEY_PLACES (a test checks it); repeated here so the engine
# stays importable without Django.
MONEY_PLACES = 12

# High precision for the only divisions done in Decimal (gpu-seconds): far below the 6 stored
# decimals, so the quantisation at write time is the only rounding that shows.
CTX = Context(prec=50)
ZERO = Decimal(0)

# JobRecord.gpus has 6 decimals: job GPUs are carried as integer millionths of a GPU.
GPU_SCALE = 10**6


class GpuSeconds(dict[tuple[int, int], Decimal]):
    """GPU-seconds as Decimal, memoised per (integer weight, unit): the same whole-hour weights
    recur millions of times, and a 50-digit division costs more than a dict lookup. The values
    are exactly those of CTX.divide(Decimal(weight), Decimal(unit))."""

    __slots__ = ()

    def __missing__(self, key: tuple[int, int]) -> Decimal:
        value = self[key] = CTX.divide(Decimal(key[0]), Decimal(key[1]))
        return value


def units_to_decimal(units: int) -> Decimal:
    return Decimal(units).scaleb(-MONEY_PLACES, CTX)


def decimal_to_units(amount: Decimal) -> int:
    """Exact integer count of MONEY_QUANTUM in amount; refuses amounts with more decimals."""
    scaled = amount.scaleb(MONEY_PLACES, CTX)
    units = int(scaled)
    if scaled != units:
        raise ValueError(f"{amount} has more than {MONEY_PLACES} decimal places")
    return units


def gpu_micros(gpus: Decimal | int) -> int:
    return int(CTX.multiply(Decimal(gpus), Decimal(GPU_SCALE)).to_integral_value())


def largest_remainder(total: int, weights: Sequence[int]) -> list[int]:
    """Split the non-negative integer total in proportion to non-negative integer weights.

    Each part gets floor(total x w / sum), then the units still missing go one each to the parts
    with the largest remainders; ties go to the earlier part (deterministic). The parts sum to
    total exactly.
    """
    denominator = sum(weights)
    if denominator == 0:
        if total:
            raise ValueError("cannot split a non-zero total over zero weights")
        return [0] * len(weights)
    if len(weights) == 1:
        return [total]  # floor(total x w / w), nothing missing
    # Comprehensions rather than a loop of appends: this runs once per line item and column.
    parts = [total * weight // denominator for weight in weights]
    missing = total - sum(parts)
    if missing:
        remainders = [total * weight % denominator for weight in weights]
        # Largest remainder first; the sort is stable, reversed too, so ties keep index order.
        order = sorted(range(len(parts)), key=remainders.__getitem__, reverse=True)
        for i in order[:missing]:
            parts[i] += 1
    return parts


def _signed_parts(amount: Decimal, weights: Sequence[int]) -> list[int]:
    """largest_remainder of a signed amount: split by magnitude, the sign given back."""
    if not amount:
        return [0] * len(weights)
    total, sign = _signed_units(amount)
    parts = largest_remainder(total, weights)
    return parts if sign > 0 else [-part for part in parts]


class Columns(Protocol):
    """The money columns of a line item (values.LineItem) that its shares split."""

    @property
    def cost(self) -> Decimal: ...
    @property
    def list_cost(self) -> Decimal: ...
    @property
    def contracted_cost(self) -> Decimal: ...


def split_columns(line: Columns, weights: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """Signed parts of the line's cost, ListCost and ContractedCost over the same weights.

    The other columns are the cost parts plus the largest-remainder split of their difference
    to the cost: each column still sums exactly to its amount, and every part moves the same
    way as its line (ListCost >= EffectiveCost gives every share list >= cost; splitting each
    column on its own would not: the largest-remainder method can give a larger total a
    smaller part, the Alabama paradox). Equal amounts (on-demand lines: ListCost ==
    EffectiveCost) cost no second split."""
    cost = _signed_parts(line.cost, weights)
    return (
        cost,
        _plus_difference(cost, line.list_cost - line.cost, weights),
        _plus_difference(cost, line.contracted_cost - line.cost, weights),
    )


def _plus_difference(base: list[int], difference: Decimal, weights: Sequence[int]) -> list[int]:
    if not difference:
        return base
    return [b + d for b, d in zip(base, _signed_parts(difference, weights), strict=True)]


def split_units(units: int, weights: Sequence[int], base: Sequence[int] | None = None) -> list[int]:
    """Signed integer units split by largest remainder (by magnitude, the sign given back),
    added to base when given (a column as the cost parts plus its difference: split_columns)."""
    if not units:
        return list(base) if base is not None else [0] * len(weights)
    parts = largest_remainder(abs(units), weights)
    if units < 0:
        parts = [-part for part in parts]
    if base is not None:
        parts = [b + p for b, p in zip(base, parts, strict=True)]
    return parts


@functools.lru_cache(maxsize=1 << 16)
def _signed_units(cost: Decimal) -> tuple[int, int]:
    # Memoised: an hourly node line costs the same hour after hour, and this runs once per line.
    units = decimal_to_units(cost)
    return abs(units), (-1 if units < 0 else 1)
