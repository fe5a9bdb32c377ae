"""A billing batch's totals per currency (invoiced, amortised, rows, credits by type), summed
exactly while its parts load and stored as ImportBatch(Part).currency_totals."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any, NotRequired, Required, TypedDict

from billing_ingest.models import ImportBatchPart
from billing_ingest.parsers.rows import ROW_NOTE, LineItemRow
from finops.core.months import month_format, month_from_label

# One currency's totals as stored in ImportBatch(Part).currency_totals, decimal strings. The
# keys are stored data (and the import page's JSON), kept: "billed" is the invoiced cost
# (BilledCost), "effective" the amortised cost (EffectiveCost); "credits" only where the rows
# carry credits (GCP): their sum by type.
CurrencyTotalsJson = TypedDict(  # noqa: UP013 (the key "billed" is data, not a name)
    "CurrencyTotalsJson",
    {
        "billed": Required[str],
        "effective": Required[str],
        "rows": Required[int],
        "credits": NotRequired[dict[str, str]],
    },
)


@dataclass
class CurrencySums:
    """One currency's sums while a delivery loads."""

    invoiced: Decimal = Decimal(0)
    amortised: Decimal = Decimal(0)
    rows: int = 0
    credits: dict[str, Decimal] = field(default_factory=dict)

    def add_credit(self, kind: object, amount: object) -> None:
        """Credits by type (GCP's PROMOTION, SUSTAINED_USAGE_DISCOUNT, ...): already in the
        sums above, kept apart so that the import says what reduced the invoice."""
        if amount is None:
            return
        key = str(kind or "") or "(no type)"
        self.credits[key] = self.credits.get(key, Decimal(0)) + Decimal(str(amount))

    def as_json(self) -> CurrencyTotalsJson:
        # Fixed-point text: "0.000000000000", never "0E-12".
        stored: CurrencyTotalsJson = {
            "billed": f"{self.invoiced:f}",
            "effective": f"{self.amortised:f}",
            "rows": self.rows,
        }
        if self.credits:
            stored["credits"] = {k: f"{v:f}" for k, v in sorted(self.credits.items())}
        return stored


class _Totals:
    """Row count, billing periods and per-currency sums, accumulated chunk by chunk."""

    def __init__(self) -> None:
        self.rows = 0
        self.periods: set[date] = set()
        self.currencies: dict[str, CurrencySums] = {}
        self.notes: Counter[str] = Counter()

    def take_notes(self, items: Iterable[LineItemRow]) -> None:
        """Count and remove the rows' notes (ROW_NOTE), which are not columns."""
        for item in items:
            note = item.pop(ROW_NOTE, None)
            if note is not None:
                self.notes[note] += 1

    def add(self, items: Iterable[LineItemRow]) -> None:
        for item in items:
            self.rows += 1
            self.periods.add(item["billing_period"])
            totals = self.currencies.setdefault(item["billing_currency"], CurrencySums())
            totals.invoiced += item["billed_cost"]
            totals.amortised += item["effective_cost"]
            totals.rows += 1
            for credit in item.get("x_credits") or ():
                totals.add_credit(credit.get("type"), credit.get("amount"))

    def add_table(self, table: Any) -> None:
        """add() for a columnar chunk: the same sums, taken by pyarrow (exact decimal sums)."""
        import pyarrow.compute as pc

        self.rows += table.num_rows
        self.periods.update(pc.unique(table.column("billing_period")).to_pylist())
        grouped = table.group_by("billing_currency").aggregate(
            [("billed_cost", "sum"), ("effective_cost", "sum"), ("billed_cost", "count")]
        )
        for row in grouped.to_pylist():
            totals = self.currencies.setdefault(row["billing_currency"], CurrencySums())
            totals.invoiced += row["billed_cost_sum"]
            totals.amortised += row["effective_cost_sum"]
            totals.rows += row["billed_cost_count"]

    def merge(self, part: ImportBatchPart) -> None:
        """Add a loaded part's recorded count, periods and totals."""
        self.rows += part.row_count
        self.periods.update(month_from_label(label) for label in part.billing_periods)
        for currency, values in part.currency_totals.items():
            totals = self.currencies.setdefault(currency, CurrencySums())
            totals.invoiced += Decimal(values["billed"])
            totals.amortised += Decimal(values["effective"])
            totals.rows += values["rows"]
            for kind, amount in values.get("credits", {}).items():
                totals.add_credit(kind, amount)
        self.notes.update(part.notes)

    def as_json(self) -> dict[str, CurrencyTotalsJson]:
        return {currency: totals.as_json() for currency, totals in sorted(self.currencies.items())}

    def period_labels(self) -> list[str]:
        return [month_format(period) for period in sorted(self.periods)]
