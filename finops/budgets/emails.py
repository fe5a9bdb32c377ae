"""The budget alert email: subject, text part and HTML part (inline CSS, no remote images).

One email per evaluation of a budget: it names every threshold the evaluation raised, each
with the day it was crossed, then the figures as of the evaluated day (so an email naming 50 %
beside "117.64 % used" says why: 50 % was crossed on an earlier day, and so were the others)."""

from __future__ import annotations

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from finops.budgets.crossings import ACTUAL, Crossing
from finops.budgets.drivers import Driver
from finops.budgets.selectors import BudgetStatus


def budget_url(budget_id: int) -> str:
    return f"{settings.SITE_URL}{reverse('budgets:detail', args=[budget_id])}"


def _percents(values: list[int]) -> str:
    words = [f"{v} %" for v in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def alert_subject(*, status: BudgetStatus, crossings: list[Crossing]) -> str:
    """E.g. "Budget Vision: actual cost reached 50 %, 80 % and 100 %; forecast reached 100 %
    (2025-09-01 to 2025-09-30)"."""
    parts = []
    for kind, what in ((ACTUAL, "actual cost"), ("forecast", "forecast")):
        levels = sorted(c.threshold for c in crossings if c.kind == kind)
        if levels:
            parts.append(f"{what} reached {_percents(levels)}")
    return (
        f"Budget {status.budget.name}: {'; '.join(parts)} "
        f"({status.period.start:%Y-%m-%d} to {status.period.end:%Y-%m-%d})"
    )


def alert_email(
    *, status: BudgetStatus, crossings: list[Crossing], drivers: dict[str, list[Driver]]
) -> tuple[str, str, str]:
    budget = status.budget
    ordered = sorted(crossings, key=lambda c: (c.crossed_on, c.kind != ACTUAL, c.threshold))
    rows = [
        {
            "what": "Actual cost" if c.kind == ACTUAL else "Forecast of the period's end",
            "kind": c.kind,
            "threshold": c.threshold,
            "level": c.level,
            "crossed_on": c.crossed_on,
        }
        for c in ordered
    ]
    context = {
        "status": status,
        "budget": budget,
        "crossings": rows,
        "drivers": [(name.capitalize(), rows) for name, rows in drivers.items()],
        "url": budget_url(budget.pk),
    }
    text = render_to_string("budgets/email_alert.txt", context)
    html = render_to_string("budgets/email_alert.html", context)
    return alert_subject(status=status, crossings=crossings), text, html
