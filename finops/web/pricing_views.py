"""Pricing pages (issue 13): the per-team comparison, commitments, the recommendation, and the
finance-only assumptions form. Thin: check access, call the pricing selectors, render."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from billing_ingest.months import month_next
from finops.org.models import Team
from finops.org.permissions import user_is_finance
from finops.org.selectors import team_list_visible
from finops.pricing.commitments import commitment_utilisation, coverage, recommendation
from finops.pricing.comparisons import assumptions_current, team_month_pricing
from finops.pricing.models import PricingAssumptions
from finops.pricing.services import pricing_assumptions_update
from finops.web.access import require_finance
from finops.web.pricing_forms import PricingAssumptionsForm
from finops.web.views import _resolve_month

# How the page names each alternative (the API keeps its keys).
ALTERNATIVE_LABELS = {
    "on_demand": "on demand",
    "spot": "spot",
    "reserved_1y": "reserved 1 year",
    "reserved_3y": "reserved 3 years",
    "on_prem": "on premises",
}


def _with_best(body: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    best = body["best_alternative"]
    # None: no alternative could be priced (the on-demand figure is unknown, no GPU-hours).
    body["best_cost"] = body[best]["cost"] if best else None
    body["best_label"] = ALTERNATIVE_LABELS.get(best, best) if best else "unknown"
    body["team_name"] = names.get(body["team"], body["team"])
    return body


def _recommendation(team: Team, month: dt.date, p: dict[str, Any] | None) -> dict[str, Any]:
    until = dt.datetime.combine(month_next(month), dt.time(), dt.UTC)
    hours = Decimal(p["gpu_hours"]) if p else Decimal(0)
    od_known = p is not None and p["on_demand"]["cost"] is not None
    od_hour = Decimal(p["on_demand"]["cost"]) / hours if p and od_known and hours else None
    rec = recommendation(
        team_id=team.pk, until=until, on_demand_gpu_hour=od_hour, assumptions=assumptions_current()
    )
    curve = [Decimal(v) for v in rec["curve"]]
    start = until - dt.timedelta(days=90)
    rec["daily"] = [
        (
            (start + dt.timedelta(days=d)).date().isoformat(),
            str((sum(curve[d * 24 : d * 24 + 24], Decimal(0)) / 24).quantize(Decimal("0.01"))),
        )
        for d in range(len(curve) // 24)
    ]
    # The demand chart's line: the longest window the history fills (none: no line).
    known = [level for level in rec["levels"] if level["gpus"] is not None]
    rec["chart_level"] = known[-1] if known else None
    rec["team"] = team.slug
    rec["team_name"] = team.name
    # Savings are priced from the team's own on-demand rate, so in its comparison's currency.
    rec["currency"] = p["currency"] if p else None
    return rec


@login_required
def pricing(request: HttpRequest) -> HttpResponse:
    month, months = _resolve_month(request)
    finance = user_is_finance(request.user)
    teams = team_list_visible(user=request.user).order_by("slug")
    names = {team.slug: team.name for team in teams}
    comparisons = [
        _with_best(p, names)
        for p in team_month_pricing(
            month=month, teams=teams, org_wide=user_is_finance(request.user)
        )
    ]
    chosen = teams.filter(slug=request.GET.get("team", "")).first() or teams.first()
    rec = None
    if chosen is not None:
        own = next((p for p in comparisons if p["team"] == chosen.slug), None)
        rec = _recommendation(chosen, month, own)
    covered = []
    for team in teams:
        share = coverage(month=month, team_id=team.pk)
        if share is not None:
            percent = (share * 100).quantize(Decimal("0.1"))
            covered.append({"team": team.name, "percent": str(percent)})
    context = {
        "month": month,
        "months": months,
        "finance": finance,
        "comparisons": comparisons,
        "coverage": covered,
        # Commitments are bought for the organisation, not a team: finance only.
        "commitments": commitment_utilisation(month=month) if finance else None,
        "recommendation": rec,
        "recommendation_teams": teams,
        "assumption_warnings": assumptions_current().warnings,
    }
    return render(request, "web/pricing.html", context)


@login_required
def pricing_settings(request: HttpRequest) -> HttpResponse:
    require_finance(request)
    # The form starts from the values in use: a stored value that fails validation shows its
    # default, and the warnings above the form say which and why.
    instance = PricingAssumptions.current()
    warnings = instance.usable()
    form = PricingAssumptionsForm(request.POST or None, instance=instance)
    if request.method == "POST" and form.is_valid():
        pricing_assumptions_update(user=request.user, values=form.checked)
        return redirect("web:pricing_settings")
    context = {"form": form, "warnings": warnings, "updated_at": instance.updated_at}
    return render(request, "web/pricing_settings.html", context)
