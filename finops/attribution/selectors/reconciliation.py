"""Reads for the reconciliation page and API: the bill (settled line items) against the ledger
(AllocatedCost), native per provider x account x currency, which is what must add up to the
bill; plus the ledger converted to the reporting currency, for information only, and why the
ledger may lag the bill (month_staleness).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings

from billing_ingest.models import CostLineItem, MonthChange
from finops.attribution.models import (
    AllocatedCost,
    AttributionRun,
    Category,
)
from finops.attribution.selectors.reporting import (
    ZERO,
    ConvertedRow,
    NativeAmount,
    Reporting,
    currency_order,
    empty_categories,
    exact_amounts,
)
from finops.core.money import MoneySum
from finops.currency.selectors import FxRateMissing, fx_rates_missing, money_round


@dataclass
class ReconciliationRow:
    """Bill vs ledger for one provider x billing account x currency (or a currency total)."""

    provider: str
    billing_account_id: str
    currency: str
    # Sum of EffectiveCost (what attribution splits) and of BilledCost (cash).
    amortised: Decimal = ZERO
    invoiced: Decimal = ZERO
    attributed: dict[str, Decimal] = field(default_factory=empty_categories)

    @property
    def attributed_total(self) -> Decimal:
        return sum(self.attributed.values(), ZERO)

    @property
    def idle(self) -> Decimal:
        return self.attributed[Category.IDLE]

    @property
    def unallocated(self) -> Decimal:
        return self.attributed[Category.UNALLOCATED]

    @property
    def difference(self) -> Decimal:
        return self.amortised - self.attributed_total

    @property
    def balanced(self) -> bool:
        return self.difference == 0

    def add(self, other: ReconciliationRow) -> None:
        self.amortised += other.amortised
        self.invoiced += other.invoiced
        for category, amount in other.attributed.items():
            self.attributed[category] += amount


@dataclass
class Reconciliation:
    month: date
    # The currency of `total`: settings.FINOPS_DEFAULT_CURRENCY, or the bill's own currency
    # when the month is billed in that one other currency only.
    currency: str
    # The lines in `currency` only: reports never add different currencies. When the month is
    # billed in several currencies, none of them the default, there is no single figure:
    # `single_total` is False and `figures` None (the `note` says why), never a zero that is
    # not the bill.
    total: ReconciliationRow
    # One total per currency present (the default one included).
    totals_by_currency: list[ReconciliationRow]
    by_account: list[ReconciliationRow]
    # For information only: the whole ledger in the reporting currency (converted per day).
    # The rows above stay native, because they must match the invoices to the cent.
    converted: Reporting | None = None
    # Why the ledger may not match the bill yet ("" when it is current): see month_staleness.
    stale_reason: str = ""
    # Why the top-level figures are not in the default currency, or are missing, and what to
    # load to see them converted ("" when they are the default currency's).
    note: str = ""
    single_total: bool = True

    @property
    def figures(self) -> ReconciliationRow | None:
        """The top-level figures, or None when the month has no single one."""
        return self.total if self.single_total else None

    @property
    def figures_currency(self) -> str | None:
        return self.currency if self.single_total else None

    @property
    def balanced(self) -> bool:
        return all(row.balanced for row in self.by_account)

    @property
    def stale(self) -> bool:
        return bool(self.stale_reason)


def month_staleness(*, month: date) -> str:
    """Why the month's ledger may lag its bill, or "" when it is current: an attribution is
    running or the last one failed, or line items changed (a billing batch settled) after the
    inputs of the last successful attribution were read, or the month was never attributed.
    A worker killed mid-import or mid-attribution can leave the month so; the page and the API
    say it rather than show a difference without a reason."""
    runs = AttributionRun.objects.filter(billing_period=month)
    latest = runs.order_by("-id").first()
    if latest is not None and latest.status == AttributionRun.Status.RUNNING:
        return "attribution is running"
    if latest is not None and latest.status == AttributionRun.Status.FAILED:
        return f"the last attribution failed: {latest.error}"
    succeeded = runs.filter(status=AttributionRun.Status.SUCCEEDED).order_by("-id").first()
    if succeeded is None:
        has_lines = CostLineItem.objects.settled().filter(billing_period=month).exists()
        return "the month's line items have not been attributed yet" if has_lines else ""
    as_of = succeeded.inputs_at or succeeded.started_at
    change = (
        MonthChange.objects.filter(
            month=month, kind=MonthChange.Kind.BILLING, changed_at__gte=as_of
        )
        .order_by("-changed_at")
        .first()
    )
    if change is None:
        return ""
    return (
        f"line items changed at {change.changed_at:%Y-%m-%d %H:%M:%S} UTC, after the last "
        f"attribution read them ({as_of:%Y-%m-%d %H:%M:%S} UTC); it is queued"
    )


def reconciliation_for_month(
    *, month: date, reporting_currency: str | None = None
) -> Reconciliation:
    """Billed (EffectiveCost of the month's line items of SUCCEEDED batches) vs the ledger, per
    provider x account x currency; difference = billed - every category, exactly 0 once
    attribution ran. Plus one converted grand total (the ledger in the reporting currency,
    per-day rates)."""
    rows: dict[tuple[str, str, str], ReconciliationRow] = {}

    def row_for(provider: str, account: str, currency: str) -> ReconciliationRow:
        key = (provider, account, currency)
        if key not in rows:
            rows[key] = ReconciliationRow(provider, account, currency)
        return rows[key]

    # Only rows of SUCCEEDED batches, as attribution reads: a batch still loading (or left
    # RUNNING by an interrupted import) holds rows that are not the bill.
    sums = (
        CostLineItem.objects.settled()
        .filter(billing_period=month)
        .order_by()
        .values("provider_name", "billing_account_id", "billing_currency")
        .annotate(effective=MoneySum("effective_cost"), cash=MoneySum("billed_cost"))
    )
    for b in sums:
        row = row_for(b["provider_name"], b["billing_account_id"], b["billing_currency"])
        row.amortised += b["effective"] or ZERO
        row.invoiced += b["cash"] or ZERO

    # By day too: the converted grand total needs each day's rate (same query, more rows).
    attributed = list(
        AllocatedCost.objects.filter(billing_period=month)
        .order_by()
        .values("provider_name", "billing_account_id", "billing_currency", "category", "day")
        .annotate(amount=MoneySum("amount"))
    )
    for a in attributed:
        row = row_for(a["provider_name"], a["billing_account_id"], a["billing_currency"])
        row.attributed[a["category"]] += a["amount"] or ZERO

    by_account = [rows[k] for k in sorted(rows)]
    per_currency: dict[str, ReconciliationRow] = {}
    for row in by_account:
        per_currency.setdefault(row.currency, ReconciliationRow("", "", row.currency)).add(row)
    converted = _ledger_converted(
        attributed,
        currency=reporting_currency or settings.FINOPS_REPORTING_CURRENCY,
        native={row.currency: row.attributed_total for row in per_currency.values()},
    )
    currency, note = _top_level_currency(
        month=month,
        currencies=sorted(per_currency, key=currency_order),
        reporting=converted.currency,
    )
    single_total = currency is not None
    currency = currency or settings.FINOPS_DEFAULT_CURRENCY
    return Reconciliation(
        month=month,
        currency=currency,
        total=per_currency.get(currency, ReconciliationRow("", "", currency)),
        single_total=single_total,
        totals_by_currency=[per_currency[c] for c in sorted(per_currency, key=currency_order)],
        by_account=by_account,
        converted=converted,
        stale_reason=month_staleness(month=month),
        note=note,
    )


FX_LOAD_HINT = (
    "`manage.py load_fx_rates FILE` (date,from,to,rate rows, or the ECB's eurofxref-hist.csv)"
)


def _top_level_currency(
    *, month: date, currencies: list[str], reporting: str
) -> tuple[str | None, str]:
    """(the currency of the top-level figures, why it is not the default one, or "").

    The default currency when the month has line items in it (or none at all: then its zeros
    are true). A month billed in one other currency only (a CUR in NOK) shows its bill in that
    currency, as invoiced: a zero in the default currency would not be the bill. Several other
    currencies are never added together: no top-level figure, each currency's total apart.
    The note names the FX rates to load for a converted total."""
    default = settings.FINOPS_DEFAULT_CURRENCY
    if not currencies or default in currencies:
        return default, ""
    named = " and ".join(currencies)
    missing = fx_rates_missing(currencies=currencies, to_currency=reporting, day=month)
    if missing:
        pairs = ", ".join(f"{m.from_currency}\u2192{m.to_currency}" for m in missing)
        load = (
            f"Converted to {reporting} only once FX rates are loaded: there is no {pairs} rate "
            f"on or before {month:%Y-%m-%d}; load them with {FX_LOAD_HINT}."
        )
    else:
        load = f"Converted to {reporting} at each day's rate, for information only."
    if len(currencies) == 1:
        return currencies[0], (
            f"Billed in {named} only (nothing in {default}): the figures are in {named}, as "
            f"invoiced. {load}"
        )
    return None, (
        f"Billed in {named}, nothing in {default}: no single figure, because different "
        f"currencies are never added; each currency's total is given apart. {load}"
    )


def _ledger_converted(rows: list[Any], *, currency: str, native: dict[str, Decimal]) -> Reporting:
    """The month's ledger rows (day, currency, amount) in one currency, for information."""
    rows = [r for r in rows if r["amount"] is not None]
    try:
        exact = exact_amounts(rows, currency=currency)
    except FxRateMissing as exc:
        return Reporting(currency=currency, error=str(exc))
    natives = [NativeAmount(c, native[c]) for c in sorted(native, key=currency_order)]
    total = ConvertedRow(total=money_round(sum(exact, Fraction(0))), native=natives)
    return Reporting(currency=currency, total=total)
