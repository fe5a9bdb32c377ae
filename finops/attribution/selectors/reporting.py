"""What the attribution selectors share: who may see which rows, the per-category row types,
and the conversion to the reporting currency.

Amounts are never added across currencies unconverted: native rows and totals are keyed by
currency; the "reporting currency" figures beside them are converted per day at the FX rates
(finops.currency.selectors: newest rate on or before the day, exact, rounded once to 12 places),
and a missing rate is shown as an error, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet

from finops.attribution.models import Category
from finops.currency.selectors import Converter, converter_for, money_round
from finops.org.models import Team

CATEGORIES: list[str] = [str(c.value) for c in Category]
ZERO = Decimal(0)
SECONDS_PER_HOUR = Decimal(3600)


def currency_order(currency: str) -> tuple[bool, str]:
    """The default currency first, then the others alphabetically."""
    return (currency != settings.FINOPS_DEFAULT_CURRENCY, currency)


def empty_categories() -> dict[str, Decimal]:
    return dict.fromkeys(CATEGORIES, ZERO)


def visible_to(qs: QuerySet, *, teams: QuerySet[Team], include_unowned: bool) -> QuerySet:
    """Rows of the given teams; rows owned by no team (platform idle, shared, unallocated)
    only when asked, because only finance may see org-wide buckets."""
    condition = Q(team__in=teams)
    if include_unowned:
        condition |= Q(team__isnull=True)
    return qs.filter(condition)


@dataclass
class CategoryRow:
    """Amounts by category for one key (a team, a total) in one currency."""

    currency: str
    by_category: dict[str, Decimal] = field(default_factory=empty_categories)
    team: Team | None = None

    @property
    def total(self) -> Decimal:
        return sum(self.by_category.values(), ZERO)

    @property
    def idle(self) -> Decimal:
        return self.by_category[Category.IDLE]

    @property
    def unallocated(self) -> Decimal:
        return self.by_category[Category.UNALLOCATED]


@dataclass
class ProviderRow:
    provider: str
    currency: str
    amount: Decimal


# --- reporting currency -------------------------------------------------------------------


@dataclass
class NativeAmount:
    currency: str
    amount: Decimal


@dataclass
class ConvertedRow:
    """One key's amounts in the reporting currency, each rounded once from its exact sum (so
    `total` is not the sum of the rounded categories; they differ by 1e-12 at most)."""

    total: Decimal
    by_category: dict[str, Decimal] = field(default_factory=empty_categories)
    # The native amounts that were converted, one per currency.
    native: list[NativeAmount] = field(default_factory=list)
    team: Team | None = None


@dataclass
class Reporting:
    """Figures converted to `currency`, or the error that stopped the conversion."""

    currency: str
    error: str = ""
    total: ConvertedRow | None = None
    teams: list[ConvertedRow] = field(default_factory=list)
    providers: list[ProviderRow] = field(default_factory=list)


def exact_amounts(rows: list[Any], *, currency: str) -> list[Fraction]:
    """Each row's `amount` (on its `day`, in its `billing_currency`) in `currency`, exactly.

    At most two queries for the rates. Rows are converted earliest day first, so a missing
    rate is reported for the first day that lacks one (later days would lack it too).
    """
    if not rows:
        return []
    rows.sort(key=lambda r: (r["day"], r["billing_currency"]))
    converter: Converter = converter_for(
        to_currency=currency,
        currencies={r["billing_currency"] for r in rows},
        first_day=rows[0]["day"],
        last_day=rows[-1]["day"],
    )
    return [
        converter.exact(day=r["day"], currency=r["billing_currency"], amount=r["amount"])
        for r in rows
    ]


def native_amounts(rows: Iterable[CategoryRow]) -> list[NativeAmount]:
    return [NativeAmount(r.currency, r.total) for r in rows]


def converted_row(
    by_category: dict[str, Fraction], *, native: list[NativeAmount], team: Team | None = None
) -> ConvertedRow:
    row = ConvertedRow(total=money_round(sum(by_category.values(), Fraction(0))), team=team)
    for category, exact in by_category.items():
        row.by_category[category] = money_round(exact)
    row.native = native
    return row
