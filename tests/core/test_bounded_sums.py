"""QuotientSum (finops.core.bounded_sums): sums of a x b / c rounded once, as an exact Fraction sum
would round them, or undecided (None) when the bounds round apart; never a wrong figure."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from finops.core.bounded_sums import QuotientSum
from finops.currency.selectors import money_round

# Amounts as the ledger holds them (12 places, credits included) times a share of a pro-rata
# split: a weight out of a positive total at least as large, as the idle showback adds them.
amounts = st.decimals(min_value=Decimal("-1e9"), max_value=Decimal("1e9"), places=12)


@st.composite
def shares(draw: st.DrawFn) -> tuple[Decimal, Decimal, Decimal]:
    total = draw(st.decimals(min_value=Decimal("1e-12"), max_value=Decimal("1e9"), places=12))
    weight = draw(st.decimals(min_value=Decimal(0), max_value=total, places=12))
    return draw(amounts), weight, total


@settings(max_examples=300, deadline=None)
@given(st.lists(shares(), min_size=1, max_size=60))
def test_decided_sums_are_the_exact_sum_rounded(terms: list[tuple[Decimal, ...]]) -> None:
    bounded = QuotientSum()
    exact = Fraction(0)
    for a, b, c in terms:
        bounded.add(a, b, c)
        exact += Fraction(a) * Fraction(b) / Fraction(c)
    assert bounded.low <= exact <= bounded.high
    rounded = bounded.rounded(money_round)
    # Undecided only where the bounds straddle a rounding boundary, which random sums never do.
    assert rounded == money_round(exact)


def test_a_sum_on_a_rounding_boundary_is_undecided() -> None:
    # Three sixths of 1e-12 make exactly half of the ledger's last place: each sixth is inexact
    # in Decimal, so the lower bound rounds down to 0 and the upper one up to 1e-12.
    bounded = QuotientSum()
    for _ in range(3):
        bounded.add(Decimal("1e-12"), Decimal(1), Decimal(6))
    assert money_round(bounded.low) == 0
    assert money_round(bounded.high) == Decimal("1e-12")
    assert bounded.rounded(money_round) is None
    # The exact sum rounds half to even: 0.
    assert money_round(Fraction(1, 2) * Fraction(1, 10**12)) == 0


def test_an_exact_boundary_is_decided_half_even() -> None:
    # Exactly representable: the bounds agree, and half rounds to even.
    bounded = QuotientSum()
    bounded.add(Decimal("1e-12"), Decimal(1), Decimal(2))
    assert bounded.rounded(money_round) == 0
