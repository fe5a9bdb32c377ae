"""The budget alert email: subject, text part and HTML part (inline CSS, no remote images)."""

from __future__ import annotations

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse

from finops.budgets.selectors import BudgetStatus, Driver


def budget_url(budget_id: int) -> str:
    return f"{settings.SITE_URL}{reverse('budgets:detail', args=[budget_id])}"


def alert_email(
    *, status: BudgetStatus, kind: str, threshold: int, drivers: dict[str, list[Driver]]
) -> tuple[str, str, str]:
    budget = status.budget
    what = "Actual cost" if kind == "actual" else "Forecast"
    subject = (
        f"Budget {budget.name}: {what.lower()} reached {threshold} % "
        f"({status.period.start:%Y-%m-%d} to {status.period.end:%Y-%m-%d})"
    )
    context = {
        "status": status,
        "budget": budget,
        "kind": kind,
        "what": what,
        "threshold": threshold,
        "drivers": [(name.capitalize(), rows) for name, rows in drivers.items()],
        "url": budget_url(budget.pk),
    }
    text = render_to_string("budgets/email_alert.txt", context)
    html = render_to_string("budgets/email_alert.html", context)
    return subject, text, html
