"""Sums of quotients (a x b / c) rounded once, exactly, without Fractions.

A sum of many pro-rata shares with different denominators, kept as a Fraction, drags a
denominator that grows with every term (its least common multiple): the gcd of numbers of
thousands of digits, each time. At 1,000 nodes the month's idle showback (a share of each
node-day's idle per team) spent 200 of the attribution step's 340 s there (cProfile).

QuotientSum keeps two Decimal sums instead, one with every step rounded down and one rounded up
(80 significant digits): the exact sum lies between them. When the two bounds round to the same
figure, that figure is the exact sum correctly rounded (rounding is monotone); when they do not
(the exact sum within about 1e-60 of a rounding boundary), `decided` says so and the caller
computes that sum again as Fractions. The figures are therefore the same as an exact Fraction
sum rounded once, in every case, not only in most.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

from finops.core.money import exact_context

# EXACT's 80 digits (finops.core.money): a product of two amounts of 28 digits is exact, and
# each rounded step errs by one unit in the 80th digit, so bounds of a sum of millions of terms
# stay 1e-70 apart or so.
_DOWN = exact_context(rounding=ROUND_FLOOR)
_UP = exact_context(rounding=ROUND_CEILING)
_ZERO = Decimal(0)


class QuotientSum:
    """Sum of a x b / c (c > 0) as lower and upper Decimal bounds of the exact sum."""

    __slots__ = ("high", "low")

    def __init__(self) -> None:
        self.low = _ZERO
        self.high = _ZERO

    def add(self, a: Decimal, b: Decimal, c: Decimal) -> None:
        # Rounded down at every step, then up: for c > 0 each step keeps its bound's side.
        self.low = _DOWN.add(self.low, _DOWN.divide(_DOWN.multiply(a, b), c))
        self.high = _UP.add(self.high, _UP.divide(_UP.multiply(a, b), c))

    def rounded(self, round_: Callable[[Decimal], Decimal]) -> Decimal | None:
        """The exact sum rounded by round_ (monotone), or None when the bounds round apart."""
        low, high = round_(self.low), round_(self.high)
        return low if low == high else None
