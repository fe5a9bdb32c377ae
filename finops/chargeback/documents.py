"""A statement as a CSV file and as a PDF, both from the same Statement object; the PDF (and
the page) from the same HTML template, chargeback/statement_body.html.

The CSV keeps every stored decimal place (like the API); the PDF shows cents (like the pages).
"""

from __future__ import annotations

import csv
import io
from decimal import ROUND_HALF_UP, Decimal

from django.http import HttpResponse
from django.template.loader import render_to_string

from finops.chargeback.selectors import Line, Statement
from finops.core.csv_safety import csv_safe
from finops.core.money import decimal_text
from finops.core.months import month_format
from finops.core.wording import counted

CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}
# One row per line. `in_total` says which rows add up: the `yes` rows (categories and
# adjustments) of a currency sum to its `total` row; `no` rows are breakdowns (runs and
# endpoints, already in their category) or the organisation's figures (for context). `amount`
# is to the cent (half up, for reading); `amount_exact` is the stored figure the totals add.
CSV_COLUMNS = [
    "team",
    "month",
    "status",
    "section",
    "in_total",
    "item",
    "origin_month",
    "reason",
    "currency",
    "amount",
    "amount_exact",
    "reporting_currency",
    "reporting_amount",
    "reporting_amount_exact",
    "gpu_hours",
]
CENT = Decimal("0.01")
# Sections in the order written, and whether their rows add up to the total.
SUMMED_SECTIONS = ("category", "adjustment")
BREAKDOWN_SECTIONS = ("endpoint", "run", "organisation")


def statement_filename(statement: Statement, extension: str) -> str:
    return f"statement-{statement.team.slug}-{month_format(statement.month)}.{extension}"


def _text(value: Decimal | None) -> str:
    return "" if value is None else decimal_text(value)


def _cents(value: Decimal | None) -> str:
    return "" if value is None else decimal_text(value.quantize(CENT, rounding=ROUND_HALF_UP))


def statement_csv_rows(statement: Statement) -> list[list[str]]:
    """The categories and adjustments (in_total yes), then one `total` row per native currency
    and one for the reporting currency, then the breakdowns (endpoints, runs) and the
    organisation's shared and idle cost (in_total no)."""
    head = [statement.team.slug, month_format(statement.month), statement.status]
    rows = []

    def add(line: Line, section: str, in_total: str) -> None:
        gpu = line.gpu_hours.quantize(Decimal("0.000001")) if line.gpu_seconds else None
        rows.append(
            [
                *head,
                section,
                in_total,
                line.key,
                month_format(line.origin_month) if line.origin_month else "",
                line.reason,
                line.currency,
                _cents(line.amount),
                _text(line.amount),
                statement.currency,
                _cents(line.reporting_amount),
                _text(line.reporting_amount),
                _text(gpu),
            ]
        )

    sections = {
        "category": statement.categories,
        "adjustment": statement.adjustments,
        "endpoint": statement.endpoints,
        "run": statement.runs,
        "organisation": statement.org,
    }
    for section in SUMMED_SECTIONS:
        for line in sections[section]:
            add(line, section, "yes")
    for native in statement.total_native:
        rows.append(
            [*head, "total", "total", "", "", "", native.currency, _cents(native.amount),
             _text(native.amount), "", "", "", ""]
        )  # fmt: skip
    rows.append(
        [*head, "total", "total", "", "", "", "", "", "", statement.currency,
         _cents(statement.total_reporting), _text(statement.total_reporting), ""]
    )  # fmt: skip
    for section in BREAKDOWN_SECTIONS:
        for line in sections[section]:
            add(line, section, "no")
    rows.extend(economics_csv_rows(statement, head))
    return rows


def _figure_row(
    head: list[str],
    section: str,
    item: str,
    value: Decimal | int | None,
    *,
    currency: str = "",
    note: str = "",
) -> list[str]:
    """A row of what the runs bought, wasted and burned: never in the total (in_total `no`).
    Money rows carry their currency (`amount` to the cent); the other figures name their unit
    in `item` and carry the figure itself in `amount` and `amount_exact`."""
    exact = "" if value is None else _text(Decimal(value))
    shown = _cents(Decimal(value)) if currency and value is not None else exact
    return [*head, section, "no", item, "", note, currency, shown, exact, "", "", "", ""]


def economics_csv_rows(statement: Statement, head: list[str]) -> list[list[str]]:
    """Sections `bought`, `wasted` (per currency) and `burned`, after the breakdowns."""
    economics = statement.economics
    if economics is None:
        return []
    rows = []
    for c in economics.currencies:
        cur = c.currency
        bought = "training runs that ended in the month, whole runs"
        rows += [
            _figure_row(head, "bought", "runs_with_metrics", c.runs_with_metrics, note=bought),
            _figure_row(head, "bought", "runs_without_metrics", c.runs_without_metrics,
                        note="counted apart: nothing measured"),
            _figure_row(head, "bought", "useful_tokens", c.useful_tokens, note=bought),
            _figure_row(head, "bought", "measured_runs_cost", c.measured_cost, currency=cur,
                        note="amortised cost of the runs with metrics"),
            _figure_row(head, "bought", "cost_per_million_tokens", c.cost_per_million_tokens,
                        currency=cur),
            _figure_row(head, "bought", "mfu_ratio", c.mfu, note="GPU-hour weighted"),
            _figure_row(head, "wasted", "runs_cost", c.runs_cost, currency=cur,
                        note=f"{counted(c.waste_runs, 'run')} of the month"),
        ]  # fmt: skip
        for cause, _label, amount, estimated in c.waste_parts:
            note = "apart: not in the waste" if cause == "cancelled" else ""
            note = "estimate" if estimated else note
            rows.append(_figure_row(head, "wasted", cause, amount, currency=cur, note=note))
        rows.append(
            _figure_row(head, "wasted", "waste_total", c.waste_total, currency=cur,
                        note="partly an estimate" if c.waste_estimated else "")
        )  # fmt: skip
    energy = economics.energy
    if energy is not None:
        estimate = "partly an estimate" if energy.estimated else "measured"
        factors = "; ".join(
            part for part in (
                f"PUE {_text(energy.pue)}: {energy.pue_source}" if energy.pue is not None else "",
                f"grid {_text(energy.grid_g_per_kwh)} g CO2e/kWh: {energy.grid_source}, "
                f"year {energy.grid_year}" if energy.grid_g_per_kwh is not None else "",
            ) if part
        )  # fmt: skip
        rows += [
            _figure_row(head, "burned", "gpu_kwh", energy.gpu_kwh, note=estimate),
            _figure_row(head, "burned", "measured_kwh", energy.measured_kwh),
            _figure_row(head, "burned", "estimated_kwh", energy.estimated_kwh,
                        note="estimate" if energy.estimated_kwh else ""),
            _figure_row(head, "burned", "measured_share_ratio", energy.measured_share),
            _figure_row(head, "burned", "facility_kwh", energy.facility_kwh,
                        note=f"{estimate}; {factors}" if factors else estimate),
            _figure_row(head, "burned", "co2e_kg", energy.co2e_kg,
                        note=f"{estimate}; location-based; {factors}" if factors else estimate),
        ]  # fmt: skip
    return rows


def statement_csv(statement: Statement) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    # Run ids and endpoint names come from job logs (a Slurm comment, a pod label): a cell that
    # a spreadsheet would run as a formula is written as text (csv_safety); amounts stay numbers.
    writer.writerows([csv_safe(cell) for cell in row] for row in statement_csv_rows(statement))
    return out.getvalue()


def statement_html(statement: Statement) -> str:
    return render_to_string("chargeback/statement_document.html", {"statement": statement})


def statement_pdf(statement: Statement) -> bytes:
    """The statement's HTML document printed by WeasyPrint (Pango renders the text)."""
    # Imported here: WeasyPrint loads Pango through cffi, which only the PDF needs.
    from weasyprint import HTML

    pdf: bytes = HTML(string=statement_html(statement)).write_pdf()
    return pdf


def statement_response(statement: Statement, *, extension: str) -> HttpResponse:
    """The statement as a download (`csv` or `pdf`); the caller checked who may see it."""
    body: str | bytes = statement_csv(statement) if extension == "csv" else statement_pdf(statement)
    response = HttpResponse(body, content_type=CONTENT_TYPES[extension])
    name = statement_filename(statement, extension)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
