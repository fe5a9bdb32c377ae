"""Reads: the FX rate for a day, and exact conversion of amounts to another currency.

The rule (DESIGN: reports, never reconciliation):

- The rate for (day, A->B) is the newest A->B rate dated on or before the day, or 1 / the
  B->A rate when only that exists or it is newer; if neither exists, the cross through EUR
  (A->EUR x EUR->B, each leg found the same way) - how the ECB history, quoted per EUR,
  serves any pair.
  The same currency is 1. Nothing found is FxRateMissing, never a silent 1.0.
- Inverse and cross rates are ratios: they are kept as exact Fractions, so nothing is rounded
  before the end. Each day's amount is converted at its day's rate, the exact products are
  summed, and each reported figure is rounded once, half even, to the ledger's 12 places.
  (Two rounded figures may therefore differ from a third, rounded from their exact sum, by at
  most 1e-12; every figure is the correctly rounded value of its exact converted sum.)

A span of rates is read in one query (RateTable.load), however many days and pairs.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fractions import Fraction

from django.db.models import OuterRef, Subquery
from django.db.models.functions import Coalesce

from finops.core.money import EXACT, MONEY_PLACES, MONEY_QUANTUM
from finops.currency.models import FxRate

PIVOT = "EUR"
ONE = Fraction(1)
_SCALE = 10**MONEY_PLACES
# Decimals below 10**40 quantize to 12 places within EXACT's 80 digits: exact.
_DECIMAL_DIGITS = 40
_ZERO = Decimal(0)


class FxRateMissing(LookupError):
    """No rate for a pair on or before a day; the message tells the user what to do."""

    def __init__(self, *, day: date, from_currency: str, to_currency: str) -> None:
        self.day = day
        self.from_currency = from_currency
        self.to_currency = to_currency
        super().__init__(
            f"no {from_currency}\u2192{to_currency} rate on or before {day:%Y-%m-%d}: load FX rates"
        )


def money_round(value: Fraction | Decimal | int) -> Decimal:
    """An exact amount, rounded once, half even, to the ledger's 12 places."""
    if isinstance(value, Decimal) and value.is_finite() and value.adjusted() < _DECIMAL_DIGITS:
        # A Decimal is exact already: quantized in a context wide enough that nothing else is
        # rounded (a Fraction of each of thousands of statement lines was most of their cost);
        # + 0 turns a negative zero into 0, as the Fraction's round() does.
        return EXACT.add(value.quantize(MONEY_QUANTUM, context=EXACT), _ZERO)
    # round() of a Fraction is exact and rounds half to even.
    units = round(Fraction(value) * _SCALE)
    return Decimal(units).scaleb(-MONEY_PLACES, context=EXACT)


@dataclass
class RateTable:
    """Rates for a set of currencies over a span of days, looked up in memory."""

    # (from, to) -> dates ascending, and the rates in the same order.
    dates: dict[tuple[str, str], list[date]] = field(default_factory=dict)
    rates: dict[tuple[str, str], list[Fraction]] = field(default_factory=dict)

    @classmethod
    def load(cls, *, currencies: Iterable[str], first_day: date, last_day: date) -> RateTable:
        """Every rate among `currencies` (and EUR, the pivot) dated first_day..last_day, plus
        the newest one before first_day per pair. One query; none for a single currency."""
        codes = set(currencies)
        table = cls()
        if len(codes) < 2:
            return table
        codes.add(PIVOT)
        # Per pair, the newest rate on or before first_day (what the span's first days use):
        # a correlated subquery on the (from, to, date) index, so one query in all.
        newest_at_start = (
            FxRate.objects.filter(
                from_currency=OuterRef("from_currency"),
                to_currency=OuterRef("to_currency"),
                date__lte=first_day,
            )
            .order_by("-date")
            .values("date")[:1]
        )
        rows = (
            FxRate.objects.filter(from_currency__in=codes, to_currency__in=codes)
            .filter(date__lte=last_day, date__gte=Coalesce(Subquery(newest_at_start), first_day))
            .order_by("from_currency", "to_currency", "date")
            .values_list("from_currency", "to_currency", "date", "rate")
        )
        for from_currency, to_currency, day, rate in rows:
            key = (from_currency, to_currency)
            table.dates.setdefault(key, []).append(day)
            table.rates.setdefault(key, []).append(Fraction(rate))
        return table

    def _quoted(self, key: tuple[str, str], day: date) -> tuple[date, Fraction] | None:
        """The newest quoted rate for the pair dated on or before the day, with its date."""
        dates = self.dates.get(key)
        if not dates:
            return None
        i = bisect.bisect_right(dates, day)
        return (dates[i - 1], self.rates[key][i - 1]) if i else None

    def _direct_or_inverse(
        self, from_currency: str, to_currency: str, day: date
    ) -> Fraction | None:
        """The newer of the direct quote and the inverted reverse quote (direct on a tie)."""
        direct = self._quoted((from_currency, to_currency), day)
        inverse = self._quoted((to_currency, from_currency), day)
        if inverse is not None and (direct is None or inverse[0] > direct[0]):
            return 1 / inverse[1]
        return direct[1] if direct is not None else None

    def rate(self, *, day: date, from_currency: str, to_currency: str) -> Fraction:
        """1 from_currency in to_currency on the day, exactly; FxRateMissing if unknown."""
        if from_currency == to_currency:
            return ONE
        found = self._direct_or_inverse(from_currency, to_currency, day)
        if found is None and PIVOT not in (from_currency, to_currency):
            to_pivot = self._direct_or_inverse(from_currency, PIVOT, day)
            from_pivot = self._direct_or_inverse(PIVOT, to_currency, day)
            if to_pivot is not None and from_pivot is not None:
                found = to_pivot * from_pivot
        if found is None:
            raise FxRateMissing(day=day, from_currency=from_currency, to_currency=to_currency)
        return found


def fx_rate_for(*, day: date, from_currency: str, to_currency: str) -> Fraction:
    """The exact rate for one day and pair (see the module docstring); FxRateMissing if none.

    For many days or pairs use RateTable.load once and RateTable.rate: one query in all.
    """
    table = RateTable.load(currencies={from_currency, to_currency}, first_day=day, last_day=day)
    return table.rate(day=day, from_currency=from_currency, to_currency=to_currency)


def fx_rates_missing(
    *, currencies: Iterable[str], to_currency: str, day: date
) -> list[FxRateMissing]:
    """The pairs currency->to_currency that have no rate on or before `day` (one query): what
    must be loaded before amounts of that day on can be converted."""
    codes = sorted(set(currencies) - {to_currency})
    table = RateTable.load(currencies={*codes, to_currency}, first_day=day, last_day=day)
    missing = []
    for code in codes:
        try:
            table.rate(day=day, from_currency=code, to_currency=to_currency)
        except FxRateMissing as exc:
            missing.append(exc)
    return missing


@dataclass
class Converter:
    """Converts one day's amount to `currency` exactly, at that day's rate (see above).

    Callers sum the exact Fractions under whatever key they report and round each reported
    figure once with money_round. FxRateMissing names the day and pair that lack a rate.
    """

    table: RateTable
    currency: str

    def exact(self, *, day: date, currency: str, amount: Decimal) -> Fraction:
        rate = self.table.rate(day=day, from_currency=currency, to_currency=self.currency)
        return Fraction(amount) * rate


def converter_for(
    *, to_currency: str, currencies: Iterable[str], first_day: date, last_day: date
) -> Converter:
    """A Converter with every rate the span needs loaded (one query at most)."""
    codes = set(currencies) | {to_currency}
    table = RateTable.load(currencies=codes, first_day=first_day, last_day=last_day)
    return Converter(table=table, currency=to_currency)
